"""moto's server with HTTP/1.1 keep-alive, for the tests of ferry's connection pool.

moto_server runs on werkzeug's development server, which since werkzeug 2.1 answers every request with
"Connection: close", so a client can never reuse a connection to it. This serves the same moto
application on the same server, minus that header: a connection stays open for as long as the client
wants it (Python's http.server then reads the next request from it). With --idle-close SECONDS the
server closes a connection that has waited that long for its next request, as real servers do, and
logs "Request timed out".

Two things in werkzeug assume that every connection closes, and are undone here: the "Connection:
close" header, and the draining of the socket after each response (it would swallow the client's next
request, or block until the client gives up). The limit that remains: a request body that the
application does not read whole would be taken for the next request; moto reads the bodies of the
requests ferry sends.

usage: moto_keepalive.py -H HOST -p PORT [--idle-close SECONDS] [-c SSL_CERT -k SSL_KEY]
"""
import argparse
import os

from moto.server import DomainDispatcherApplication, create_backend_app
import werkzeug.serving
from werkzeug.serving import WSGIRequestHandler, run_simple


class NeverReadable:
    """Stands in for the selectors module in werkzeug.serving, whose one use is the drain after a
    response: with no socket ever readable, the drain reads nothing."""

    EVENT_READ = 1

    class DefaultSelector:
        def register(self, *args):
            pass

        def select(self, timeout=None):
            return []

        def close(self):
            pass


class KeepAliveHandler(WSGIRequestHandler):
    def send_header(self, keyword, value):
        # http.server has already decided from the request whether the connection closes; werkzeug's
        # unconditional "close" would override that decision.
        if keyword.lower() == "connection" and value.lower() == "close" and not self.close_connection:
            return
        super().send_header(keyword, value)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    parser.add_argument("--idle-close", type=float, default=0.0)
    parser.add_argument("-c", "--ssl-cert")
    parser.add_argument("-k", "--ssl-key")
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))  # as moto_server does
    if args.idle_close > 0:
        # The socket timeout of each connection: a wait for the next request that exceeds it ends the
        # connection (http.server logs "Request timed out").
        KeepAliveHandler.timeout = args.idle_close
    werkzeug.serving.selectors = NeverReadable
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True  # as moto_server does
    tls = (args.ssl_cert, args.ssl_key) if args.ssl_cert and args.ssl_key else None
    run_simple(args.host, args.port, app, threaded=True, request_handler=KeepAliveHandler, ssl_context=tls)


if __name__ == "__main__":
    main()
