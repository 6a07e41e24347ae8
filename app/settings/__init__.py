"""Settings: the values, their dialog, their store and the notes beside them."""
