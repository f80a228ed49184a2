"""The end-to-end scripts' verdicts: each check prints `ok` or `FAIL` with what it found (long
details cut to 1,500 characters), and a script ends with `sys.exit(1 if verdicts.failures else 0)`.
Also the free local port the scripts start servers on."""
import socket

failures = 0


def ok(msg):
    print("ok  ", msg, flush=True)


def bad(msg):
    global failures
    failures += 1
    print("FAIL", msg, flush=True)


def check(cond, msg, detail=""):
    ok(msg) if cond else bad(f"{msg}: {str(detail)[:1500]}")
    return cond


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p
