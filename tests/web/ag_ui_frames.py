"""Validates AG-UI frames (a JSON list in the file named by argv[1]) against the ag-ui-protocol
package's event models: each must parse as an Event, and dump back (by alias, without unset
fields) to exactly what agentd sent, so no field is misnamed or unknown. Prints `TYPE ok`."""
import json
import sys

from pydantic import TypeAdapter

from ag_ui.core import Event

adapter = TypeAdapter(Event)
with open(sys.argv[1], encoding="utf-8") as f:
    frames = json.load(f)
failed = 0
for frame in frames:
    try:
        event = adapter.validate_python(frame)
        dumped = event.model_dump(by_alias=True, exclude_none=True, mode="json")
        if dumped != frame:
            raise ValueError(f"round trip differs: {dumped!r}")
        print(frame["type"], "ok")
    except Exception as error:  # noqa: BLE001 - report every frame
        failed += 1
        print(frame.get("type"), "FAILED", frame, error)
sys.exit(1 if failed else 0)
