"""moto's server answering one request at a time, for tests of S3 conditional writes.

S3 applies a conditional PUT (If-Match, If-None-Match) atomically. moto 5.2.1 compares the ETag and then
stores the object without a lock, on a threaded server, so two PUTs that race with the same If-Match can
both land: a lost update that real S3 never allows. Served one request at a time, moto's check and store
cannot interleave, and a test of writers racing through conditional writes tests ferry, not moto's race.

usage: moto_serial.py -H HOST -p PORT [-c SSL_CERT -k SSL_KEY]
"""
import argparse
import os

from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    parser.add_argument("-c", "--ssl-cert")
    parser.add_argument("-k", "--ssl-key")
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))  # as moto_server does
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True  # as moto_server does
    tls = (args.ssl_cert, args.ssl_key) if args.ssl_cert and args.ssl_key else None
    run_simple(args.host, args.port, app, threaded=False, ssl_context=tls)


if __name__ == "__main__":
    main()
