# Sourced by the reports' reproduce.sh scripts (which set OUT): timed NAME COMMAND... runs the command and
# adds its wall time in seconds under NAME in $OUT/wall.json (a step resumed in parts adds up its parts).
timed() {
  local name=$1; shift
  local start=$SECONDS
  "$@"
  python - "$OUT/wall.json" "$name" $((SECONDS - start)) <<'PY'
import json, pathlib, sys
path, name, seconds = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
wall = json.loads(path.read_text()) if path.exists() else {}
wall[name] = wall.get(name, 0) + seconds
path.write_text(json.dumps(wall, indent=2, sort_keys=True) + "\n")
PY
}
# stale FILE NAME: a probe record FILE counted by another tie rule than today's (research.probe.TIES) is
# removed, and NAME's wall time with it, so that the step runs again and its time is the new run's.
stale() {
  [ -f "$1" ] || return 0
  python - "$1" "$OUT/wall.json" "$2" <<'PY'
import json, pathlib, sys
from full_metric.research.probe import TIES
record, wall, name = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
if json.loads(record.read_text()).get("ties") != TIES:
    record.unlink()
    if wall.exists():
        times = json.loads(wall.read_text())
        times.pop(name, None)
        wall.write_text(json.dumps(times, indent=2, sort_keys=True) + "\n")
PY
}
