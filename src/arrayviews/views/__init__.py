"""Views layer: materialized array views (similarity-join aggregates and window aggregates), their
definitions, delta computation and incremental maintenance."""
