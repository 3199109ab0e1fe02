"""Time-partitioned streams and the views maintained over them by View Delta Functions (ViewDF)."""
