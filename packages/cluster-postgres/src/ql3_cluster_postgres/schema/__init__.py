"""The schema room: migrations (the ledger, the advisory lock, the version check) and roles.

Owns applying `migrations/*.sql` and provisioning the least-privilege group roles and login
users from `provisioning/*.sql` (DESIGN §11, §12). The SQL folders stay at the package's top
level: the wheel ships them there and each migration's checksum is part of the ledger.

May import: the package's base modules only; the repository and the ingress import its version
check.

What other rooms and the package's `__init__` use is re-exported here: the modules stay
private to the room (import-linter's `private_modules`).
"""

from __future__ import annotations

from ._migrations import SCHEMA_VERSION, check_schema_version, migrate
from ._roles import (
    GROUP_ROLES,
    ROLE_NAMES,
    create_login_user,
    group_role_name,
    provision_roles,
    provision_roles_if_missing,
)

__all__ = [
    "GROUP_ROLES",
    "ROLE_NAMES",
    "SCHEMA_VERSION",
    "check_schema_version",
    "create_login_user",
    "group_role_name",
    "migrate",
    "provision_roles",
    "provision_roles_if_missing",
]
