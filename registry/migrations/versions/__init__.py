"""The revision scripts, oldest first by their ``down_revision`` (``../README.md``)."""
