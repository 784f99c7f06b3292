"""Strict fakes of two image-generation APIs, written from their published definitions.

Usage: image_apis.py fal CERT KEY FAL_KEY LOG   (HTTPS, FAL's queue API)
       image_apis.py openai OPENAI_KEY LOG      (HTTP, OpenAI's Images API)
Prints the port it listens on (127.0.0.1), then serves until killed. Every request is
appended to LOG as one JSON line (method, path, headers, body or multipart fields).

FAL queue API (https://queue.fal.run): POST /{owner}/{app}[/{path}] with
`Authorization: Key <key>` and a JSON object answers {request_id, response_url,
status_url, cancel_url}; GET .../requests/{id}/status answers IN_QUEUE (202) once, then
COMPLETED (200); GET .../requests/{id} answers the model's result
{"images": [{"url", "width", "height", "content_type"}], ...}; the image URL serves a
PNG. Status and result URLs use only owner/app, as the API defines. The upscaler
`fal-ai/clarity-upscaler` requires `image_url` and answers {"image": {...}} with an image
twice the size.

OpenAI Images API: POST /v1/images/generations (JSON) and POST /v1/images/edits
(multipart/form-data, `image` or `image[]` files) with `Authorization: Bearer <key>`
answer {"created", "data": [{"b64_json"}], "usage"}; a request outside the definition
(unknown field, size or quality not in its enum, no prompt) is answered 400 with an
OpenAI error object.
"""
import base64
import http.server
import json
import ssl
import struct
import sys
import threading
import uuid
import zlib
from email.parser import BytesParser
from email.policy import HTTP

mode = sys.argv[1]
if mode == "fal":
    cert, keyfile, api_key, log_path = sys.argv[2:6]
else:
    api_key, log_path = sys.argv[2:4]
lock = threading.Lock()
jobs = {}


def png(width, height, rgb=(200, 30, 60)):
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def log(entry):
    with lock, open(log_path, "a") as f:
        f.write(json.dumps(entry) + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def entry(self, **extra):
        entry = {"method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
        entry.update(extra)
        log(entry)

    # ---- FAL ----
    def base(self):
        return "https://" + self.headers.get("Host")

    def fal_auth(self):
        if self.headers.get("Authorization") != f"Key {api_key}":
            self.reply(401, {"detail": "Invalid authentication credentials"})
            return False
        return True

    def fal_post(self):
        raw = self.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.entry(body=body)
        if not self.fal_auth():
            return
        if not (self.headers.get("Content-Type") or "").startswith("application/json"):
            return self.reply(422, {"detail": "the body must be JSON"})
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), str) or not body["prompt"].strip():
            return self.reply(422, {"detail": [{"loc": ["body", "prompt"], "msg": "field required", "type": "value_error.missing"}]})
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) < 2:
            return self.reply(404, {"detail": "Not Found"})
        owner_app = "/".join(parts[:2])
        if "/".join(parts) == "fal-ai/clarity-upscaler" and not isinstance(body.get("image_url"), str):
            return self.reply(422, {"detail": [{"loc": ["body", "image_url"], "msg": "field required", "type": "value_error.missing"}]})
        request_id = str(uuid.uuid4())
        jobs[request_id] = {"polls": 0, "body": body, "model": "/".join(parts)}
        root = f"{self.base()}/{owner_app}/requests/{request_id}"
        self.reply(200, {"status": "IN_QUEUE", "request_id": request_id, "response_url": root,
                         "status_url": root + "/status", "cancel_url": root + "/cancel", "queue_position": 0})

    def fal_get(self):
        self.entry()
        path = self.path.split("?")[0]
        if path.startswith("/files/"):
            request_id = path[len("/files/"):].removesuffix(".png")
            if request_id not in jobs:
                return self.reply(404, {"detail": "Not Found"})
            upscaled = jobs[request_id]["model"] == "fal-ai/clarity-upscaler"
            return self.reply(200, png(96, 54) if upscaled else png(48, 27), "image/png")
        if not self.fal_auth():
            return
        parts = path.strip("/").split("/")
        if len(parts) < 4 or parts[2] != "requests" or parts[3] not in jobs:
            return self.reply(404, {"detail": "Request not found"})
        job = jobs[parts[3]]
        if len(parts) == 5 and parts[4] == "status":
            job["polls"] += 1
            if job["polls"] == 1:
                return self.reply(202, {"status": "IN_QUEUE", "request_id": parts[3], "queue_position": 0,
                                        "response_url": f"{self.base()}/{'/'.join(parts[:4])}"})
            return self.reply(200, {"status": "COMPLETED", "request_id": parts[3], "logs": None,
                                    "response_url": f"{self.base()}/{'/'.join(parts[:4])}", "metrics": {"inference_time": 0.1}})
        if len(parts) == 4:
            if job["polls"] < 2:
                return self.reply(400, {"detail": "Request is still in progress"})
            url = f"{self.base()}/files/{parts[3]}.png"
            if job["model"] == "fal-ai/clarity-upscaler":
                return self.reply(200, {"image": {"url": url, "width": 96, "height": 54, "content_type": "image/png"},
                                        "seed": 42, "timings": {"inference": 0.1}})
            return self.reply(200, {"images": [{"url": url, "width": 48, "height": 27, "content_type": "image/png"}],
                                    "seed": 42, "has_nsfw_concepts": [False], "prompt": job["body"]["prompt"],
                                    "timings": {"inference": 0.1}})
        return self.reply(404, {"detail": "Not Found"})

    # ---- OpenAI ----
    def openai_error(self, status, message, param=None):
        self.reply(status, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}})

    GENERATION_FIELDS = {"model", "prompt", "n", "size", "quality", "background", "moderation", "output_compression",
                         "output_format", "response_format", "style", "user", "partial_images", "stream"}
    EDIT_FIELDS = {"model", "prompt", "n", "size", "quality", "background", "input_fidelity", "mask", "output_compression",
                   "output_format", "response_format", "user", "partial_images", "stream", "image", "image[]"}
    SIZES = {"auto", "1024x1024", "1536x1024", "1024x1536", "256x256", "512x512", "1792x1024", "1024x1792"}
    QUALITIES = {"auto", "low", "medium", "high", "standard", "hd"}

    def check_common(self, fields):
        if not isinstance(fields.get("prompt"), str) or not fields["prompt"].strip():
            return "prompt is required"
        if "size" in fields and fields["size"] not in self.SIZES:
            return f"Invalid value: '{fields['size']}'. Supported values are: {sorted(self.SIZES)}"
        if "quality" in fields and fields["quality"] not in self.QUALITIES:
            return f"Invalid value for quality: '{fields['quality']}'"
        if "n" in fields:
            try:
                n = int(fields["n"])
            except (TypeError, ValueError):
                return "n must be an integer"
            if not 1 <= n <= 10:
                return "n must be between 1 and 10"
        return None

    def openai_post(self):
        raw = self.body()
        path = self.path.split("?")[0]
        content_type = self.headers.get("Content-Type") or ""
        if path == "/v1/images/generations":
            try:
                fields = json.loads(raw)
            except ValueError:
                fields = None
            self.entry(body=fields)
            if self.headers.get("Authorization") != f"Bearer {api_key}":
                return self.openai_error(401, f"Incorrect API key provided: {self.headers.get('Authorization')}")
            if not content_type.startswith("application/json") or not isinstance(fields, dict):
                return self.openai_error(400, "the body must be a JSON object")
            unknown = set(fields) - self.GENERATION_FIELDS
            if unknown:
                return self.openai_error(400, f"Unknown parameter: '{sorted(unknown)[0]}'.", sorted(unknown)[0])
            problem = self.check_common(fields)
            if problem:
                return self.openai_error(400, problem)
            size = fields.get("size", "1024x1024")
        elif path == "/v1/images/edits":
            if not content_type.startswith("multipart/form-data"):
                self.entry(body=None)
                return self.openai_error(400, "the body must be multipart/form-data")
            message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
            fields, files = {}, []
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                if part.get_filename() is not None:
                    data = part.get_payload(decode=True)
                    files.append({"field": name, "filename": part.get_filename(), "content_type": part.get_content_type(),
                                  "bytes": len(data), "magic": base64.b64encode(data[:8]).decode()})
                else:
                    fields[name] = part.get_payload(decode=True).decode()
            self.entry(fields=fields, files=files)
            if self.headers.get("Authorization") != f"Bearer {api_key}":
                return self.openai_error(401, "Incorrect API key provided")
            unknown = (set(fields) | {f["field"] for f in files}) - self.EDIT_FIELDS
            if unknown:
                return self.openai_error(400, f"Unknown parameter: '{sorted(unknown)[0]}'.", sorted(unknown)[0])
            if not files or any(f["field"] not in ("image", "image[]") for f in files):
                return self.openai_error(400, "image is required", "image")
            if any(f["content_type"] not in ("image/png", "image/jpeg", "image/webp") for f in files):
                return self.openai_error(400, "Invalid image file: supported formats are png, jpeg and webp", "image")
            problem = self.check_common(fields)
            if problem:
                return self.openai_error(400, problem)
            size = fields.get("size", "1024x1024")
        else:
            self.entry(body=None)
            return self.openai_error(404, f"Invalid URL (POST {path})")
        w, h = (int(x) for x in (size if size != "auto" else "1024x1024").split("x"))
        image = png(w // 64, h // 64, (20, 120, 220))
        self.reply(200, {"created": 1700000000, "background": "opaque", "output_format": "png", "quality": "medium",
                         "size": size, "data": [{"b64_json": base64.b64encode(image).decode()}],
                         "usage": {"input_tokens": 10, "output_tokens": 100, "total_tokens": 110,
                                   "input_tokens_details": {"text_tokens": 10, "image_tokens": 0}}})

    def do_POST(self):
        if mode == "fal":
            self.fal_post()
        else:
            self.openai_post()

    def do_GET(self):
        if mode == "fal":
            self.fal_get()
        else:
            self.entry()
            self.openai_error(404, "Not found")


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
if mode == "fal":
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, keyfile)
    server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
