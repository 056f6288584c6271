"""Keys and the project's trust store (ADR 0031).

- :mod:`eidolons.keys.store`: the trust store ``<root>/.eidolons/trust.json`` (public keys,
  roles, validity, revocation, per-edge sender-signature policy). Pure over bytes plus an
  atomic save; no cryptography.
- :mod:`eidolons.keys.files`: where private keys live and which key files are refused (a
  file group or others can read, another user's file, a file inside the project). No
  cryptography.
- :mod:`eidolons.keys.crypto`: Ed25519 through the ``cryptography`` library; the only
  module that imports it, and only the commands that sign or verify import this one.
- :mod:`eidolons.keys.dsse`: DSSE envelopes (PAE, JSON form); signing and verifying go
  through :mod:`eidolons.keys.crypto`.
- :mod:`eidolons.keys.pins`: this host's pins of project trust stores (ADR 0036).
- :mod:`eidolons.keys.registry`: which project, at which root, each orchestrator key signs
  for on this host (the gate signs nowhere else).
- :mod:`eidolons.keys.lifecycle`: ``init_role(root, role)``, the idempotent ``keys init``
  that ``eidolons init`` calls in-process.
"""
