"""Keys and the project's trust store (ADR 0011): the store (``store``), private key files
(``files``), Ed25519 (``crypto``, the one import of ``cryptography``), DSSE (``dsse``),
host pins (``pins``, ADR 0011), trace heads (``heads``), root registrations
(``registry``) and the ``keys init`` / ``keys register`` calls (``lifecycle``).
"""
