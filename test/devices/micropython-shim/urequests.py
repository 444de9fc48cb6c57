# MicroPython's `urequests` over CPython's urllib, for running docs/devices/micropython/client.py
# under CPython in the tests: the calls and attributes the client uses, no more. Like the
# device, it follows no redirect, and an error status is an answer, not an exception.
import json as _json
import urllib.error
import urllib.request


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = urllib.request.build_opener(_NoRedirect)


class Response:
    def __init__(self, status_code, content):
        self.status_code = status_code
        self.content = content

    @property
    def text(self):
        return self.content.decode("utf-8")

    def json(self):
        return _json.loads(self.content)

    def close(self):
        pass


def request(method, url, data=None, json=None, headers=None, timeout=None):
    if json is not None:
        data = _json.dumps(json)
    body = data.encode("utf-8") if isinstance(data, str) else data
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with _opener.open(req, timeout=timeout) as answer:
            return Response(answer.status, answer.read())
    except urllib.error.HTTPError as error:
        return Response(error.code, error.read())
    except urllib.error.URLError as error:
        # MicroPython raises OSError for a refused or unreachable host.
        raise OSError(str(error.reason)) from None


def post(url, **kwargs):
    return request("POST", url, **kwargs)


def get(url, **kwargs):
    return request("GET", url, **kwargs)
