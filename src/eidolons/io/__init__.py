"""The only readers of the project's files: paths, descriptors beneath the root, the
project's layout and settings, payloads and envelopes, contracts."""
