"""Chat formats: the template sandbox, rendering with a family's switches, and each model family's reply format.

A family (one module in :mod:`.families`) declares its markers as data (:class:`~.family.Family`); it is chosen from
the chat template's own text (:func:`.families.detect`). :class:`~.stream.ReplySplitter` turns a reply's text, as it
streams, into content, thinking and tool calls for the server and the app alike.
"""
