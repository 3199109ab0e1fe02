"""Command-line interface (`arrayviews ...`) and the demo job."""
