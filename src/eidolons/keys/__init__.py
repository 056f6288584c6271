"""Keys and the project's trust store (ADR 0011): the store and its host pins (``store``),
this host's key files, project registrations and trace heads (``host``), signatures,
receipts and sender signatures (``receipts``, the one import of ``cryptography``) and the
``keys init`` / ``keys register`` calls (``lifecycle``).
"""
