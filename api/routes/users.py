"""DELETE /v1/users/{user_id}: erase one user of the caller's tenant, everywhere.

Needs the `admin` scope: erasure is irreversible and reaches every store, so an app's
everyday read/write key cannot wipe users if it leaks.
"""

from __future__ import annotations

from fastapi import APIRouter

import api.convertors  # noqa: F401  (registers {name:id})
from api.deps import AdminTenantDep, StateDep
from api.schemas import ErasureReceiptPublic, IdentifierPath
from memwell.memories.erasure import erase_user_async

router = APIRouter(prefix="/v1/users", tags=["users"])


# `:id` (api/convertors.py): user ids may contain "/", which arrives decoded.
@router.delete("/{user_id:id}")
async def delete_user(
    user_id: IdentifierPath, state: StateDep, tenant: AdminTenantDep
) -> ErasureReceiptPublic:
    receipt = await erase_user_async(state.sessions, state.redis, tenant=tenant, user_id=user_id)
    return ErasureReceiptPublic.model_validate(receipt, from_attributes=True)
