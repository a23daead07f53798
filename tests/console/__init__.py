"""Browser tests of the review console."""
