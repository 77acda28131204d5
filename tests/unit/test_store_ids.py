"""store.new_id: the text of a random uuid4, as str(uuid.uuid4()) makes it (without importing uuid
on every start)."""

from __future__ import annotations

import re
import uuid

from tmuxjail.store import new_id

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_new_id_is_a_uuid4_text():
    ids = {new_id() for _ in range(2000)}
    assert len(ids) == 2000
    for i in ids:
        u = uuid.UUID(i)
        assert UUID4.match(i) and str(u) == i and u.version == 4 and u.variant == uuid.RFC_4122
