"""The schema room: migrations (the ledger, the advisory lock, the version check) and roles.

Owns applying `migrations/*.sql` and provisioning the least-privilege group roles and login
users from `provisioning/*.sql` (DESIGN §11, §12). The SQL folders stay at the package's top
level: the wheel ships them there and each migration's checksum is part of the ledger.

May import: the package's base modules only; the repository and the ingress import its version
check.
"""
