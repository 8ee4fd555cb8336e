#!/usr/bin/env bash
# The slow half of the bad-input and fault campaign (issue 14); the fast half is tests/test_bad_inputs.py.
#
#   scripts/fault_campaign.sh [CODE_DIR]            # one line per case: case <TAB> outcome
#   scripts/fault_campaign.sh --compare OLD NEW      # the same cases on two checkouts: a Markdown table
#
# CODE_DIR (default: this checkout) is put first on PYTHONPATH, so an older tree (git archive REV | tar -x)
# can be compared with this one. Everything runs in a scratch folder with its own PROBING_CACHE, on
# 127.0.0.1 only, each command bounded by `timeout`. Each case states the expected behaviour; the outcome
# column says what happened (OK = the expected behaviour). Needs: the bundled default model, ~1 GB of disk.
set -u
PY=${PYTHON:-/work/main/.venv/bin/python}
HERE=$(cd "$(dirname "$0")/.." && pwd)

if [[ ${1:-} == --compare ]]; then
    old=$("$0" "$2") new=$("$0" "$3")
    echo "| case (expected behaviour) | before | after |"
    echo "|---|---|---|"
    paste <(cut -f1 <<<"$old") <(cut -f2 <<<"$old") <(cut -f2 <<<"$new") | sed 's/\t/ | /g; s/^/| /; s/$/ |/'
    exit 0
fi

CODE=$(cd "${1:-$HERE}" && pwd)
W=$(mktemp -d /tmp/fault-campaign.XXXXXX)
trap 'chmod -R u+w "$W" 2>/dev/null; rm -rf "$W"' EXIT
export PYTHONPATH=$CODE PROBING_CACHE=$W/cache OMP_NUM_THREADS=1 PROBING_OFFLINE=
cd "$W" || exit 1  # python -m and python - put the current folder first on sys.path
probing() { timeout "${T:-120}" "$PY" -m probing.cli "$@"; }
row() { printf '%s\t%s\n' "$1" "$2"; }
last_err() { tail -n 1 "$W/err" | cut -c1-110 | tr '\t|' '  '; }

# a small text corpus: 300 sentences of 8-20 words
"$PY" - "$W/corpus.txt" <<'EOF'
import random, sys
random.seed(0)
words = "the cat sat on a mat dog ran to bank river money Paris quickly green idea sleeps of and".split()
with open(sys.argv[1], "w") as f:
    for _ in range(300):
        f.write(" ".join(random.choice(words) for _ in range(random.randint(8, 20))) + "\n")
EOF
EXTRACT=(extract --model default --corpus text --path "$W/corpus.txt" -q)

# 1. SIGKILL mid-extract, then rerun
"$PY" -m probing.cli "${EXTRACT[@]}" --cache "$W/s1" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 600); do compgen -G "$W/s1/.corpus-*" >/dev/null && break; sleep 0.05; done
sleep 0.5; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
left=$(ls -a "$W/s1" | grep -c '^\.corpus-')
probing "${EXTRACT[@]}" --cache "$W/s1" >"$W/out" 2>"$W/err"; rc=$?
after=$(ls -a "$W/s1" | grep -c '^\.corpus-')
row "SIGKILL mid-extract, rerun (resumes; the killed run's corpus copy is removed)" \
    "rc $rc; corpus copies left: $left after kill, $after after rerun"

# 2. two concurrent extractions of one store
probing "${EXTRACT[@]}" --cache "$W/s2" >"$W/o1" 2>&1 & p1=$!
probing "${EXTRACT[@]}" --cache "$W/s2" >"$W/o2" 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
row "two concurrent extractions of one store (both get it, encoded once)" \
    "rc $r1/$r2; same store: $([[ $(grep '^store:' "$W/o1") == "$(grep '^store:' "$W/o2")" ]] && echo yes || echo no)"

STORE=$(awk '/^store:/ {print $2}' "$W/o1")
# 3. flipped layer bytes in a finished store, then a cache hit
"$PY" - "$STORE/layer_001.npy" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(4096); b = f.read(64); f.seek(4096); f.write(bytes(x ^ 0x55 for x in b))
EOF
probing "${EXTRACT[@]}" --cache "$W/s2" >"$W/out" 2>"$W/err"; rc=$?
ok=$("$PY" -c "from probing.store import Store; Store.open('$STORE').verify(); print('verifies')" 2>&1 | tail -n1 | cut -c1-60)
row "bytes flipped in a layer file, then a hit (detected, named, recomputed)" \
    "rc $rc; $(grep -c 'sha256' "$W/err") sha256 message(s); store after: $ok"

# 4. random bytes of the right size as tokens.parquet
"$PY" -c "import os,sys; p=sys.argv[1]; open(p,'wb').write(os.urandom(os.path.getsize(p)))" "$STORE/tokens.parquet"
probing "${EXTRACT[@]}" --cache "$W/s2" >"$W/out" 2>"$W/err"; rc=$?
ok=$("$PY" -c "from probing.store import Store; s=Store.open('$STORE'); print(len(s.tokens),'rows')" 2>&1 | tail -n1 | cut -c1-60)
row "random-bytes tokens.parquet of the right size (not a complete store: rebuilt)" "rc $rc; tokens after: $ok"

# 5. planted symlink where a layer file goes
cp -r "$STORE" "$W/keep"
rm -f "$STORE"/*; echo precious >"$W/victim"; ln -s "$W/victim" "$STORE/layer_000.npy"
probing "${EXTRACT[@]}" --cache "$W/s2" >"$W/out" 2>"$W/err"; rc=$?
row "symlink planted at a layer file of the store (never written through)" \
    "rc $rc; target $([[ $(cat "$W/victim") == precious ]] && echo intact || echo OVERWRITTEN)"

# 6. read-only cache serving a complete store (the cache folder mounted read-only in a private namespace)
unshare -m sh -c 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"' _ "$W/s2" \
    timeout 120 "$PY" -m probing.cli "${EXTRACT[@]}" --cache "$W/s2" >"$W/out" 2>"$W/err"; rc=$?
row "read-only cache holding the complete store (served)" "rc $rc; $( ((rc == 0)) && echo served || last_err)"

# 7. SIGKILL mid-embed, then rerun; 8. SIGTERM mid-embed
"$PY" -c "
import random; random.seed(1)
w='the cat sat on a mat dog ran to bank'.split()
open('$W/big.txt','w').write(''.join(' '.join(random.choice(w) for _ in range(30))+'\n' for _ in range(3000)))"
mkdir -p "$W/emb"
for sig in KILL TERM; do
    "$PY" -m probing.cli embed --model default --input "$W/big.txt" --output "$W/emb/out.hdf5" -q >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 300); do compgen -G "$W/emb/.out.hdf5.*" >/dev/null && break; sleep 0.1; done
    sleep 1; kill -s $sig $pid; wait $pid; rc=$?
    n=$(ls -a "$W/emb" | grep -c '\.tmp$')
    if [[ $sig == KILL ]]; then
        head -n 5 "$W/big.txt" >"$W/small.txt"
        probing embed --model default --input "$W/small.txt" --output "$W/emb/out.hdf5" -q >/dev/null 2>&1
        m=$(ls -a "$W/emb" | grep -c '\.tmp$')
        row "SIGKILL mid-embed, then another embed into that folder (temp file removed)" \
            "temp files: $n after kill, $m after rerun"
    else
        row "SIGTERM mid-embed (temp file removed at once)" "rc $rc; temp files left: $n"
    fi
    rm -f "$W"/emb/.*.tmp
done

# 9. embed --output equal to --input
cp "$W/small.txt" "$W/same.txt"; before=$(md5sum <"$W/same.txt")
probing embed --model default --input "$W/same.txt" --output "$W/./same.txt" -q >"$W/out" 2>"$W/err"; rc=$?
row "embed --output equal to --input (refused, input kept)" \
    "rc $rc; input $([[ $(md5sum <"$W/same.txt") == "$before" ]] && echo kept || echo DESTROYED)"

# 10. one 20,000-token line
"$PY" -c "open('$W/long.txt','w').write(' '.join(['word']*20000)+'\n')"
/usr/bin/time -f '%M' -o "$W/rss" timeout 300 "$PY" -m probing.cli embed --model default --input "$W/long.txt" \
    --output "$W/long.hdf5" -q >"$W/out" 2>"$W/err"; rc=$?
row "one 20,000-token line to embed (refused with its line; bounded memory)" \
    "rc $rc; peak RSS $(($(tail -n1 "$W/rss") / 1024)) MiB"

# 11. --max-sentences 0
probing "${EXTRACT[@]}" --cache "$W/s3" --max-sentences 0 >"$W/out" 2>"$W/err"; rc=$?
row "--max-sentences 0 (refused at parse time)" "rc $rc; $(grep -o 'store:.*' "$W/out" | head -c 40)$(last_err)"

# 12-13. options that mean nothing, absurd sizes (bounded by a 6 GB address-space limit)
"$PY" -c "
import json, sys
from probing.paths import resources_dir
d = json.load(open(resources_dir() / 'models/default/options.json'))
d['lstm']['n_layers'] = -1; d['lstm']['cell_clip'] = -1
json.dump(d, open('$W/neg.json', 'w'))
d = json.load(open(resources_dir() / 'models/default/options.json'))
d['lstm']['dim'] = 400000; d['lstm']['projection_dim'] = 20000
json.dump(d, open('$W/huge.json', 'w'))"
probing random-weights --options "$W/neg.json" --out "$W/neg" >"$W/out" 2>"$W/err"; rc=$?
row "options n_layers -1, cell_clip -1 (refused naming the key)" "rc $rc; $(last_err)"
(ulimit -v 6000000; probing random-weights --options "$W/huge.json" --out "$W/huge" >"$W/out" 2>"$W/err"); rc=$?
row "options needing ~260 GB of weights (refused before allocating)" "rc $rc; $(last_err)"

# 14. NaN weights
"$PY" -c "
import shutil, h5py, numpy as np
from probing.paths import resources_dir
src = resources_dir() / 'models/default'
shutil.copy(src / 'options.json', '$W/nan-options.json'); shutil.copy(src / 'weights.hdf5', '$W/nan.hdf5')
with h5py.File('$W/nan.hdf5', 'r+') as f:
    ds = f['CNN_proj/W_proj']; a = ds[...]; a[0, 0] = np.nan; ds[...] = a"
probing embed --options "$W/nan-options.json" --weights "$W/nan.hdf5" --input "$W/small.txt" \
    --output "$W/nan-out.hdf5" -q >"$W/out" 2>"$W/err"; rc=$?
row "weights with a NaN (refused naming the dataset)" "rc $rc; $( ((rc == 0)) && echo 'embedded silently' || last_err)"

# 14b. a file-size limit (ulimit -f, 1 MiB) during embed and extract (issue 33)
mkdir -p "$W/limited"
(ulimit -f 1024; probing embed --model default --input "$W/corpus.txt" --output "$W/limited/out.hdf5" -q \
    >"$W/out" 2>"$W/err"); rc=$?
row "embed past ulimit -f (one line naming the output, exit 2, no .tmp)" \
    "rc $rc; $(wc -l <"$W/err") line(s); $(ls -A "$W/limited" | wc -l) file(s) left; $(last_err)"
(ulimit -f 1024; probing extract --model default --corpus "text:$W/corpus.txt" --cache "$W/limited/c" -q \
    >"$W/out" 2>"$W/err"); rc=$?
left=$(find "$W/limited/c" -mindepth 1 -maxdepth 1 -type d ! -name corpus-memo 2>/dev/null | wc -l)
row "extract past ulimit -f (one line naming the file, exit 2, no store folder)" "rc $rc; $left store folder(s); $(last_err)"

# 15. hostile servers on 127.0.0.1: an HTML page first, a drip feed, a corrupt partial
timeout 60 "$PY" -u - "$W" >"$W/net" 2>&1 <<'EOF'
import os, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from probing import download
from probing.download import fetch
w = sys.argv[1]
download.RETRY_WAIT_S = 0
download.TIMEOUT_S = 3
download.STALL_S, download.STALL_BYTES = 2.0, 4096  # ignored by code without stall detection
good = b"\x89HDF\r\n\x1a\n" + os.urandom(200_000)
state = {"html": True, "drip": False}
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/w.hdf5" and state["html"]:
            body = b"<!DOCTYPE html><html><body>Service Unavailable</body></html>"
        else:
            body = good
        start = 0
        rng = self.headers.get("Range")
        if rng and self.path != "/w.hdf5":
            start = int(rng.split("=")[1].rstrip("-"))
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(body)-1}/{len(body)}")
        self.send_header("Content-Length", str(len(body) - start)); self.end_headers()
        try:
            if self.path == "/drip.hdf5":
                for i in range(start, len(body)):
                    self.wfile.write(body[i:i+1]); self.wfile.flush(); time.sleep(0.05)
            else:
                self.wfile.write(body[start:])
        except OSError:
            pass
srv = ThreadingHTTPServer(("127.0.0.1", 0), H); srv.daemon_threads = True
threading.Thread(target=srv.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{srv.server_address[1]}"
def attempt(url, **kw):
    try:
        p = fetch(url, progress=False, retries=0, **kw)
        return "ok" if p.read_bytes() == good else "WRONG BYTES"
    except Exception as e:
        msg = str(e).splitlines()[0]
        return f"{type(e).__name__}: {msg[msg.find('(last: '):][:80] if '(last: ' in msg else msg[:80]}"
first = attempt(base + "/w.hdf5"); state["html"] = False; second = attempt(base + "/w.hdf5")
print(f"html\tfirst: {first}; then the genuine file: {second}")
url = base + "/p.hdf5"; part = download.cache_path(url).with_name(download.cache_path(url).name + ".part")
part.parent.mkdir(parents=True, exist_ok=True); part.write_bytes(os.urandom(1000))
print(f"partial\t{attempt(url)}")
t0 = time.monotonic(); r = attempt(base + "/drip.hdf5")
print(f"drip\t{r} after {time.monotonic() - t0:.0f} s")
EOF
row "hostile server: an HTML page first (never pinned), then the genuine file (accepted)" "$(grep '^html' "$W/net" | cut -f2)"
drip=$(grep '^drip' "$W/net" | cut -f2)
row "hostile server: drips 20 bytes/s (cut off as stalled, clear message)" "${drip:-still waiting after 60 s (killed)}"
row "a random-bytes .part is left (discarded, not resumed)" "$(grep '^partial' "$W/net" | cut -f2)"

# 16. zip bomb and non-zip archive for the WSD data
"$PY" - "$W" >"$W/zip" 2>&1 <<'EOF'
import sys, zipfile
from pathlib import Path
from probing.corpora.registry import unpack_raganato
w = Path(sys.argv[1])
with zipfile.ZipFile(w / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as zf:
    with zf.open("x/semcor.data.xml", "w", force_zip64=True) as f:
        for _ in range(300):
            f.write(b"\0" * (1 << 20))
(w / "page.zip").write_bytes(b"<!DOCTYPE html><html>Not Found</html>")
for name in ("bomb.zip", "page.zip"):
    try:
        unpack_raganato(w / name, w / "wsd")
        r = "unpacked"
    except Exception as e:
        r = f"{type(e).__name__}: {str(e).splitlines()[0].split(': ', 1)[-1][:60]}"
    size = sum(p.stat().st_size for p in (w / "wsd").rglob("*") if p.is_file()) if (w / "wsd").exists() else 0
    print(f"{name}\t{(w / name).stat().st_size >> 10} KiB archive: {r}; {size >> 20} MiB written")
EOF
row "zip bomb as the WSD archive (refused before writing)" "$(grep '^bomb' "$W/zip" | cut -f2)"
row "an HTML page saved as the WSD zip (clear error)" "$(grep '^page' "$W/zip" | cut -f2)"
