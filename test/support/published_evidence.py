"""The evidence each published calculation saw, rebuilt from its episode's artifacts and confirmed by the
receipt's evidence_sha256 (sha256 of the evidence as compact JSON with sorted keys).

Usage: python published_evidence.py EPISODE_FOLDER  ->  one JSON line per calculation, in call order:
{"call", "id", "evidence" (the object, keys in the published order) or null when no candidate hashes
to the receipt's, "code", "receipt"}.

The published events log gives the purchases before each call and when the call ended; the session's
seconds at the call's start are not logged, so they are found: each hundredth of a second from 60 s
before the call's end to its end is tried until the hash matches."""

import hashlib
import json
import sys
from pathlib import Path

CALLS = 20
SESSION_SECONDS = 1800.0


def compact_sha256(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def main(folder):
    root = Path(folder)
    events = [json.loads(line) for line in (root / "events.jsonl").read_text().splitlines() if line.strip()]
    final = json.loads((root / "evidence.json").read_text())
    order = json.loads((root / "calculation_order.json").read_text())
    utility = {o["mask"]: o["utility"] for o in final["observations"]}
    budget = final["credits_remaining"] + sum(e.get("credits_spent", 0) for e in events if e["event"] == "observe")
    for call, ident in enumerate(order, 1):
        folder_of_call = root / "calculations" / ident
        receipt = json.loads((folder_of_call / "receipt.json").read_text())
        observations, spent, ended = list(final["observations"][:2]), 0, None
        for event in events:
            if event["event"] == "calculation" and event["number"] == call:
                ended = event["elapsed"]
                break
            if event["event"] == "observe":
                seen = {o["mask"] for o in observations}
                for mask in event["masks"]:
                    if mask not in seen:
                        observations.append({"mask": mask, "utility": utility[mask]})
                        seen.add(mask)
                spent += event.get("credits_spent", 0)
        found = None
        for hundredths in range(int((ended - 60) * 100), int(ended * 100) + 2):
            elapsed = hundredths / 100
            evidence = {
                "observations": observations,
                "credits_remaining": budget - spent,
                "closed": False,
                "calculation_calls_remaining": CALLS - call,
                "session_seconds_elapsed": elapsed,
                "session_seconds_remaining": round(SESSION_SECONDS - elapsed, 2),
                "task": final["task"],
            }
            if compact_sha256(evidence) == receipt["evidence_sha256"]:
                found = evidence
                break
        code = (folder_of_call / "code.py").read_text()
        print(json.dumps({"call": call, "id": ident, "evidence": found, "code": code, "receipt": receipt}))


if __name__ == "__main__":
    main(sys.argv[1])
