#!/bin/bash
# Records what PyFlink prints for its own DataStream examples into tests/porting/expected/
# (PyFlink installed as ../shared/peers/README.md says; its workers need `python` on PATH).
#   bash tests/porting/record_pyflink_outputs.sh [PEERS_ROOT]
set -u
PEERS_ROOT=${1:-${PEERS_ROOT:-$HOME/peers}}
export PATH=$PEERS_ROOT/flink/venv/bin:$PATH
EX=$PEERS_ROOT/flink/venv/lib/python3.11/site-packages/pyflink/examples/datastream
OUT=$(cd "$(dirname "$0")" && pwd)/expected
mkdir -p "$OUT"
for f in word_count basic_operations event_time_timer process_json_data state_access \
    windowing/session_with_dynamic_gap_window windowing/session_with_gap_window \
    windowing/sliding_time_window windowing/tumbling_count_window windowing/tumbling_time_window; do
  name=$(basename $f)
  # PyFlink's own start-up notices are not the example's output
  (cd /tmp && timeout 400 python "$EX/$f.py") 2>/dev/null \
    | grep -v -E "^(Using Any for unsupported type|No module named google|PYFLINK_CYTHON_ENABLED)" \
    > "$OUT/$name.txt"
  echo "$name: exit ${PIPESTATUS[0]}, $(wc -l < "$OUT/$name.txt") lines"
done
