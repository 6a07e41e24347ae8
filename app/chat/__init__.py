"""Chat: the conversation view, the input, the reply lifecycle and the readout."""
