"""Statement language: parser, syntax tree and the executor that turns statements into API calls."""
