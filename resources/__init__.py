"""Data files shipped with ssd-chat (pair catalog, prompt sets, icons)."""
