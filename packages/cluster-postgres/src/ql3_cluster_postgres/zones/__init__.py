"""The zones room: the database as the zone rules authority (DESIGN §9).

Owns the recorded zone rules version and its history, every version's stored rule data (read,
record, load), the adopt that switches versions and moves what changed, and the per-replica
cache the repository claims with.

May import: the package's base modules only. The rooms above it (`admin`, `verify`,
`repository`) read zone rules from here; nothing here imports them.
"""
