"""Root conftest: intentionally nearly empty; the plugin loads through its pytest11 entry point."""
