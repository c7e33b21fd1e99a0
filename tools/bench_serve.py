#!/usr/bin/env python3
# A streaming load client for OpenAI-compatible servers (`cera serve`, llama.cpp's llama-server):
# the same client drives each server at several concurrencies and reports output tokens/s, time to
# first token and inter-token latency, so that two servers can be put side by side
# (docs/benchmarks/serve_h200.md). Python 3 standard library only: the GPU machine has no network.
#
#   python3 tools/bench_serve.py --url http://127.0.0.1:18080 --concurrency 1,16,64 \
#       --prompt-tokens 128 --max-tokens 128 --label cera --json cera.json
#
# Prompts: a fixed pseudo-random word corpus is tokenized once by the server under test
# (POST /tokenize {"content": TEXT, "add_special": false} -> {"tokens": [...]}, which cera and
# llama-server both answer); request i's prompt is two leading token ids unique to it (distinct
# first tokens, so no request reuses another's cached prefix) then a window of the corpus' ids,
# exactly --prompt-tokens ids in all, sent as a token-id array to POST /v1/completions. Both
# servers take token ids as they are (no BOS added), so for the same model file they get the same
# ids; the printed prompt digest (sha256 of every prompt) shows it.
#
# Each request: stream true with stream_options.include_usage, temperature 0, ignore_eos true,
# max_tokens N. Timed on the client's monotonic clock:
#   TTFT  = send -> the first chunk with non-empty text;
#   ITL   = the gaps between successive chunks with non-empty text, pooled over the level's
#           requests (both servers send one token a chunk, except where a token's bytes end
#           mid-UTF-8 and the server holds them for the next chunk);
#   TPOT  = (last token chunk - first token chunk) / (completion_tokens - 1), per request;
#   output tokens/s = the level's completion tokens (usage.completion_tokens, which must equal
#           --max-tokens: a request that comes back shorter is an error) / the level's wall time
#           (first send -> last request done), warm-up excluded.
# Every level starts with one warm-up wave of `concurrency` requests (max_tokens 8, not counted).
# Exit status 1 when any request failed or came back with the wrong token counts.
#
# Connections: one thread a stream, each with a kept-alive http.client connection; when the server
# closed it after the last response (llama-server does after every stream) the request goes again
# at once on a new one, timed from that send. --no-keepalive opens one a request. --tcp-quickack
# makes the client ACK every segment at once: a server that leaves Nagle on (no TCP_NODELAY) holds
# a small write until the last one is ACKed, and the client's delayed ACK (40 ms on Linux) then
# shows in TTFT and ITL (seen with cera serve at d34a343 on reused connections).
# Cross-checks printed per level: llama-server's own timings (its last chunk) and the means of the
# server's /metrics latency histograms over the level, where it has them (cera).
import argparse
import hashlib
import http.client
import json
import queue
import random
import socket
import sys
import threading
import time
import urllib.parse

WORDS = (
    "time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government number "
    "night point home water room mother area money story fact month lot right study book eye job word "
    "business issue side kind head house service friend father power hour game line end member law car "
    "city community name president team minute idea kid body information back parent face others level "
    "office door health person art war history party result change morning reason research girl guy "
    "moment air teacher force education foot boy age policy everything process music market sense nation "
    "plan college interest death experience effect use class control care field development role effort "
    "rate heart drug show leader light voice wife police mind price report decision son view relationship "
    "town road arm difference value building action model season society tax director position player "
    "record paper space ground form event official matter center couple site project activity star table "
    "need court oil situation cost industry figure street image phone data picture practice piece land "
    "product doctor wall patient worker news test movie north love support technology step baby computer "
    "type attention film tree source organization hair window evidence population site glass river "
    "bright quiet ancient rapid golden silver hidden gentle frozen distant narrow hollow steady eager "
    "run walk speak build carry follow gather wander settle measure borrow choose listen remember"
).split()


def percentile(xs, p):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class Client:
    def __init__(self, url, api_key=None, timeout=600.0):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http":
            raise SystemExit(f"--url: only http:// is supported, got {url!r}")
        self.host = u.hostname
        self.port = u.port or 80
        self.base = u.path.rstrip("/")
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = "Bearer " + api_key

    def connect(self):
        c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        c.connect()
        return c

    def get_json(self, path, body=None, timeout=None):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)
        try:
            if body is None:
                c.request("GET", self.base + path, headers=self.headers)
            else:
                c.request("POST", self.base + path, body=json.dumps(body), headers=self.headers)
            r = c.getresponse()
            data = r.read()
            return r.status, data
        finally:
            c.close()


def wait_ready(client, seconds):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            st, data = client.get_json("/health", timeout=5)
            if st == 200:
                return
            last = f"HTTP {st} {data[:200]!r}"
        except OSError as e:
            last = repr(e)
        time.sleep(0.5)
    raise SystemExit(f"server not ready after {seconds} s: {last}")


def discover_model(client):
    st, data = client.get_json("/v1/models", timeout=30)
    if st != 200:
        raise SystemExit(f"GET /v1/models: HTTP {st}: {data[:300]!r}")
    models = json.loads(data).get("data") or []
    if not models:
        raise SystemExit("GET /v1/models: no models listed")
    return models[0]["id"]


def tokenize(client, text):
    st, data = client.get_json("/tokenize", {"content": text, "add_special": False}, timeout=120)
    if st != 200:
        raise SystemExit(f"POST /tokenize: HTTP {st}: {data[:300]!r}")
    toks = json.loads(data)["tokens"]
    if toks and isinstance(toks[0], dict):  # llama-server's with_pieces shape
        toks = [t["id"] for t in toks]
    return [int(t) for t in toks]


def build_prompts(client, n_prompts, n_tokens, seed):
    """n_prompts prompts of exactly n_tokens ids each, each with its own leading ids (the first one
    differs between any two prompts while there are more distinct ids than prompts; beyond that,
    the first k ids together, k the fewest digits in base len(distinct ids) that number them)."""
    rng = random.Random(seed)
    corpus = " ".join(rng.choice(WORDS) for _ in range(max(2000, 4 * n_tokens)))
    ids = tokenize(client, corpus)
    if len(ids) < n_tokens + 16:
        raise SystemExit(f"the corpus tokenized to only {len(ids)} ids")
    uniq = list(dict.fromkeys(ids))
    if len(uniq) < 2:
        raise SystemExit("the corpus tokenized to fewer than 2 distinct ids")
    u = len(uniq)
    k = 1
    while u ** k < n_prompts:
        k += 1
    if k > n_tokens // 2:
        raise SystemExit(f"{n_prompts} prompts of {n_tokens} ids: too few distinct ids ({u})")
    span = len(ids) - n_tokens
    prompts = []
    for i in range(n_prompts):
        head = [uniq[(i // u ** d) % u] for d in range(k)]
        off = (i * 7919) % span
        prompts.append((head + ids[off:off + n_tokens])[:n_tokens])
    return prompts, u


QUICKACK = False  # --tcp-quickack


def one_request(client, conn, model, prompt, max_tokens, ignore_eos, extra):
    """Returns (record, conn): conn is the connection to reuse (None if it must be reopened)."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}, "ignore_eos": ignore_eos}
    if model:
        body["model"] = model
    body.update(extra)
    payload = json.dumps(body).encode()
    rec = {"ok": False, "error": None, "ttft": None, "itl": [], "e2e": None, "chunks": 0,
           "completion_tokens": None, "prompt_tokens": None, "finish_reason": None, "server_timings": None}
    reused = conn is not None
    if conn is None:
        conn = client.connect()
    t0 = time.perf_counter()
    try:
        try:
            conn.request("POST", client.base + "/v1/completions", body=payload, headers=client.headers)
            resp = conn.getresponse()
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            if not reused:
                raise
            # The server closed the kept-alive connection after the last response (llama-server
            # does after every stream): send again on a fresh one, timed from the new send.
            conn.close()
            conn = client.connect()
            t0 = time.perf_counter()
            conn.request("POST", client.base + "/v1/completions", body=payload, headers=client.headers)
            resp = conn.getresponse()
        if resp.status != 200:
            rec["error"] = f"HTTP {resp.status}: {resp.read()[:300]!r}"
            return rec, (conn if not resp.will_close else None)
        last = None
        done = False
        readline = resp.readline
        sock = conn.sock
        while True:
            if QUICKACK and sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            line = readline()
            if not line:
                break
            if not line.startswith(b"data:"):
                continue
            now = time.perf_counter()
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            obj = json.loads(data)
            if "error" in obj:
                rec["error"] = "stream error: " + json.dumps(obj["error"])[:300]
                break
            timings = obj.get("timings")  # llama-server's own per-request timings
            if timings and "predicted_per_token_ms" in timings:
                rec["server_timings"] = timings
            usage = obj.get("usage")
            if usage:
                rec["completion_tokens"] = usage.get("completion_tokens")
                rec["prompt_tokens"] = usage.get("prompt_tokens")
            for ch in obj.get("choices") or ():
                if ch.get("text"):
                    if last is None:
                        rec["ttft"] = now - t0
                    else:
                        rec["itl"].append(now - last)
                    last = now
                    rec["chunks"] += 1
                if ch.get("finish_reason"):
                    rec["finish_reason"] = ch["finish_reason"]
        t1 = time.perf_counter()
        if not done and rec["error"] is None:
            rec["error"] = "the stream ended without data: [DONE]"
        resp.read()  # the chunked terminator, so the connection can be reused
        rec["e2e"] = t1 - t0
        if rec["error"] is None:
            if rec["completion_tokens"] is None:
                rec["error"] = "no usage in the stream (stream_options.include_usage)"
            elif rec["completion_tokens"] != max_tokens:
                rec["error"] = (f"completion_tokens {rec['completion_tokens']} != max_tokens {max_tokens} "
                                f"(finish_reason {rec['finish_reason']}; is ignore_eos honoured?)")
            elif rec["prompt_tokens"] is not None and rec["prompt_tokens"] != len(prompt):
                rec["error"] = f"prompt_tokens {rec['prompt_tokens']} != {len(prompt)} sent"
            elif rec["ttft"] is None:
                rec["error"] = "no chunk with text"
            else:
                rec["ok"] = True
        return rec, (None if resp.will_close else conn)
    except (OSError, http.client.HTTPException, ValueError) as e:
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["e2e"] = time.perf_counter() - t0
        try:
            conn.close()
        except OSError:
            pass
        return rec, None


def run_wave(client, model, prompts, concurrency, max_tokens, ignore_eos, extra, progress=None, keepalive=True):
    """Sends every prompt, `concurrency` at a time (each worker one keep-alive connection)."""
    work = queue.Queue()
    for i, p in enumerate(prompts):
        work.put((i, p))
    results = [None] * len(prompts)

    def worker():
        conn = None
        while True:
            try:
                i, p = work.get_nowait()
            except queue.Empty:
                break
            rec, conn = one_request(client, conn, model, p, max_tokens, ignore_eos, extra)
            results[i] = rec
            if not keepalive and conn is not None:
                conn.close()
                conn = None
            if progress:
                progress()
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(concurrency, len(prompts)))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.perf_counter() - t0


def summarize(results, wall, concurrency):
    ok = [r for r in results if r["ok"]]
    ttft = [r["ttft"] for r in ok]
    itl = [x for r in ok for x in r["itl"]]
    tpot = [sum(r["itl"]) / (r["completion_tokens"] - 1) for r in ok if r["completion_tokens"] > 1]
    e2e = [r["e2e"] for r in ok]
    out_tokens = sum(r["completion_tokens"] for r in ok)
    errors = [r["error"] for r in results if not r["ok"]]
    ms = 1000.0
    st = [r["server_timings"] for r in ok if r["server_timings"]]
    server = {}
    if st:  # llama-server: prompt_ms is its prompt phase alone; predicted_per_token_ms its decode pace
        server = {"llama_prompt_ms_mean": sum(t.get("prompt_ms", 0.0) for t in st) / len(st),
                  "llama_predicted_per_token_ms_mean": sum(t["predicted_per_token_ms"] for t in st) / len(st)}
    return {
        "concurrency": concurrency, "requests": len(results), "ok": len(ok), "errors": len(errors),
        "error_samples": errors[:5], "wall_s": wall, "output_tokens": out_tokens,
        "output_tok_s": out_tokens / wall if wall > 0 else 0.0,
        "ttft_ms": {"p50": percentile(ttft, 50) * ms, "p99": percentile(ttft, 99) * ms,
                    "mean": (sum(ttft) / len(ttft) * ms) if ttft else float("nan")},
        "itl_ms": {"p50": percentile(itl, 50) * ms, "p99": percentile(itl, 99) * ms,
                   "mean": (sum(itl) / len(itl) * ms) if itl else float("nan")},
        "tpot_ms": {"p50": percentile(tpot, 50) * ms, "p99": percentile(tpot, 99) * ms},
        "e2e_ms": {"p50": percentile(e2e, 50) * ms, "p99": percentile(e2e, 99) * ms},
        "chunks_per_request": (sum(r["chunks"] for r in ok) / len(ok)) if ok else 0.0,
        "server_reported": server,
    }


def scrape_metrics(client):
    """The _sum and _count of the server's latency histograms (GET /metrics), or {} if none."""
    try:
        st, data = client.get_json("/metrics", timeout=10)
    except OSError:
        return {}
    if st != 200:
        return {}
    vals = {}
    for line in data.decode(errors="replace").splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, _, value = line.rpartition(" ")
        if (name.endswith("_sum") or name.endswith("_count")) and any(
                k in name for k in ("time_to_first_token", "inter_token_latency", "e2e_request_latency")):
            try:
                vals[name] = float(value)
            except ValueError:
                pass
    return vals


def metrics_means(before, after):
    """Mean of each histogram over a level, in ms, from two scrapes."""
    out = {}
    for name in after:
        if not name.endswith("_sum"):
            continue
        base = name[:-4]
        n = after.get(base + "_count", 0.0) - before.get(base + "_count", 0.0)
        if n > 0:
            out[base.split(":")[-1] + "_mean_ms"] = (after[name] - before.get(name, 0.0)) / n * 1000.0
    return out


def fmt(x, nd=1):
    if x != x:  # NaN
        return "-"
    return f"{x:,.{nd}f}"


def table(label, levels):
    rows = ["| server | concurrency | requests | errors | output tok/s | TTFT p50 / p99 ms | "
            "ITL p50 / p99 ms | TPOT p50 ms | e2e p50 s | wall s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in levels:
        rows.append(f"| {label} | {s['concurrency']} | {s['requests']} | {s['errors']} | "
                    f"{fmt(s['output_tok_s'])} | {fmt(s['ttft_ms']['p50'])} / {fmt(s['ttft_ms']['p99'])} | "
                    f"{fmt(s['itl_ms']['p50'], 2)} / {fmt(s['itl_ms']['p99'], 2)} | "
                    f"{fmt(s['tpot_ms']['p50'], 2)} | {fmt(s['e2e_ms']['p50'] / 1000, 2)} | {fmt(s['wall_s'], 2)} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1] if __doc__ else None)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--model", default=None, help="model id to send (default: the first of GET /v1/models)")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--concurrency", default="1,16,64", help="comma-separated levels")
    ap.add_argument("--requests-per-level", default=None,
                    help="one number for every level, or a comma-separated list matching --concurrency "
                         "(default: max(32, 8 x concurrency))")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--no-ignore-eos", action="store_true", help="do not send ignore_eos: true")
    ap.add_argument("--warmup-tokens", type=int, default=8, help="max_tokens of the warm-up wave (0: none)")
    ap.add_argument("--seed", type=int, default=1234, help="seed of the prompt corpus")
    ap.add_argument("--wait-ready", type=float, default=0.0, help="poll GET /health up to this many seconds first")
    ap.add_argument("--timeout", type=float, default=600.0, help="socket timeout of a request, seconds")
    ap.add_argument("--label", default=None, help="the server's name in the table (default: the model id)")
    ap.add_argument("--json", default=None, help="write the results (per level, and the raw per-request numbers) here")
    ap.add_argument("--no-keepalive", action="store_true",
                    help="a new connection for every request (default: one kept-alive connection a stream)")
    ap.add_argument("--tcp-quickack", action="store_true",
                    help="ACK every segment at once (Linux TCP_QUICKACK before each read): takes the client's "
                         "delayed ACK out of a server's Nagle wait, for servers that leave TCP_NODELAY off")
    ap.add_argument("--extra", default=None, help='JSON object merged into every request body, e.g. \'{"top_k": 1}\'')
    args = ap.parse_args()

    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    if not levels or min(levels) < 1:
        raise SystemExit("--concurrency: positive integers, comma-separated")
    if args.requests_per_level is None:
        per_level = [max(32, 8 * c) for c in levels]
    else:
        per_level = [int(x) for x in args.requests_per_level.split(",")]
        if len(per_level) == 1:
            per_level *= len(levels)
        if len(per_level) != len(levels):
            raise SystemExit("--requests-per-level: one number, or one per --concurrency level")
    extra = json.loads(args.extra) if args.extra else {}
    global QUICKACK
    QUICKACK = args.tcp_quickack
    ignore_eos = not args.no_ignore_eos
    sys.setswitchinterval(0.0005)  # hand the GIL over quickly: 64 streams' reads stay timely

    client = Client(args.url, args.api_key, args.timeout)
    if args.wait_ready > 0:
        wait_ready(client, args.wait_ready)
    model = args.model or discover_model(client)
    label = args.label or model

    n_warm = sum(levels) if args.warmup_tokens > 0 else 0
    prompts, n_uniq = build_prompts(client, sum(per_level) + n_warm, args.prompt_tokens, args.seed)
    digest = hashlib.sha256(json.dumps(prompts).encode()).hexdigest()[:16]
    print(f"# {label}: model {model}, {len(prompts)} prompts of {args.prompt_tokens} ids "
          f"({n_uniq} distinct ids in the corpus), prompt digest {digest}, max_tokens {args.max_tokens}, "
          f"ignore_eos {ignore_eos}", flush=True)

    out = {"label": label, "url": args.url, "model": model, "prompt_tokens": args.prompt_tokens,
           "max_tokens": args.max_tokens, "ignore_eos": ignore_eos, "keepalive": not args.no_keepalive,
           "tcp_quickack": args.tcp_quickack, "prompt_digest": digest,
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "levels": [], "raw": []}
    pos = 0
    failed = False
    for c, n in zip(levels, per_level):
        if n_warm:
            warm = prompts[pos:pos + c]
            pos += c
            wres, wwall = run_wave(client, model, warm, c, args.warmup_tokens, ignore_eos, extra,
                                   keepalive=not args.no_keepalive)
            bad = [r["error"] for r in wres if r["error"] and "completion_tokens" not in r["error"]]
            if bad:
                print(f"# warm-up at concurrency {c}: {len(bad)} failed, first: {bad[0]}", flush=True)
        batch = prompts[pos:pos + n]
        pos += n
        m0 = scrape_metrics(client)
        res, wall = run_wave(client, model, batch, c, args.max_tokens, ignore_eos, extra,
                             keepalive=not args.no_keepalive)
        s = summarize(res, wall, c)
        if m0:
            s["server_reported"].update(metrics_means(m0, scrape_metrics(client)))
        out["levels"].append(s)
        out["raw"].append({"concurrency": c, "requests": [
            {k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items() if k != "itl"} |
            {"itl": [round(x, 6) for x in r["itl"]]} for r in res]})
        print(f"# concurrency {c}: {s['ok']}/{s['requests']} ok, {fmt(s['output_tok_s'])} output tok/s, "
              f"TTFT p50 {fmt(s['ttft_ms']['p50'])} ms, ITL p50 {fmt(s['itl_ms']['p50'], 2)} ms, "
              f"{s['chunks_per_request']:.1f} text chunks a request, wall {wall:.2f} s", flush=True)
        if s["server_reported"]:
            print("#   the server's own means: " + ", ".join(f"{k} {v:.2f}" for k, v in s["server_reported"].items()),
                  flush=True)
        if s["errors"]:
            failed = True
            print(f"# ERRORS at concurrency {c}: {s['errors']}; first: {s['error_samples']}", file=sys.stderr,
                  flush=True)
    print(table(label, out["levels"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
