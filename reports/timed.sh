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
