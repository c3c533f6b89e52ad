// HTTP/1.1 over a raw TCP socket, for the tests that fetch() cannot write:
// pipelined requests, half-closes, malformed or oversized heads, slow
// clients. RawConnection reads responses as they come (Content-Length or
// chunked bodies, 1xx interim responses kept apart) and knows when the
// server closed the connection.
import { readFileSync } from 'node:fs';
import net from 'node:net';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class RawConnection {
  constructor(port) {
    this.socket = net.connect({ port, host: '127.0.0.1' });
    this.socket.setNoDelay(true);
    this.buf = Buffer.alloc(0);
    this.closed = false; // the server closed (EOF or reset)
    this.error = null;
    this.interim = []; // 1xx status codes received
    this.waiters = [];
    this.socket.on('data', (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.wake();
    });
    this.socket.on('end', () => {
      this.closed = true;
      this.wake();
    });
    this.socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    this.socket.on('error', (e) => {
      this.error = e;
      this.closed = true;
      this.wake();
    });
    this.connected = new Promise((resolve, reject) => {
      this.socket.once('connect', resolve);
      this.socket.once('error', reject);
    });
  }

  wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  // Resolves on the next data or close, or after `ms`.
  waitForData(ms) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  // Writes and resolves once the bytes are handed to the kernel (rejects if the server reset).
  write(data) {
    return new Promise((resolve, reject) => {
      this.socket.write(data, (err) => (err ? reject(err) : resolve()));
    });
  }

  // Half-close: no more bytes from us; we still read.
  end() {
    this.socket.end();
  }

  destroy() {
    this.socket.destroy();
  }

  // One complete response parsed from the front of the buffer, or null.
  parseOne() {
    const sep = this.buf.indexOf('\r\n\r\n');
    if (sep < 0) return null;
    const head = this.buf.subarray(0, sep).toString('latin1');
    const [statusLine, ...lines] = head.split('\r\n');
    const status = Number(statusLine.split(' ')[1]);
    const headers = {};
    for (const l of lines) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    let rest = this.buf.subarray(sep + 4);
    if (status >= 100 && status < 200) {
      this.interim.push(status);
      this.buf = rest;
      return this.parseOne();
    }
    let body;
    if (headers['transfer-encoding'] === 'chunked') {
      const parts = [];
      let pos = 0;
      for (;;) {
        const eol = rest.indexOf('\r\n', pos);
        if (eol < 0) return null;
        const size = parseInt(rest.subarray(pos, eol).toString('latin1'), 16);
        if (rest.length < eol + 2 + size + 2) return null;
        if (size === 0) {
          pos = eol + 4;
          break;
        }
        parts.push(rest.subarray(eol + 2, eol + 2 + size));
        pos = eol + 2 + size + 2;
      }
      body = Buffer.concat(parts);
      rest = rest.subarray(pos);
    } else if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (rest.length < n) return null;
      body = rest.subarray(0, n);
      rest = rest.subarray(n);
    } else {
      if (!this.closed) return null; // a body that ends with the connection
      body = rest;
      rest = Buffer.alloc(0);
    }
    this.buf = rest;
    const text = body.toString('utf8');
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {}
    return { status, headers, text, json };
  }

  // The next response; null if the connection closed (or `timeoutMs` passed) first.
  async response(timeoutMs = 10000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = this.parseOne();
      if (r) return r;
      if (this.closed || Date.now() >= deadline) return null;
      await this.waitForData(Math.max(1, deadline - Date.now()));
    }
  }

  // Resolves true once the server has closed the connection (false after `timeoutMs`).
  async closedWithin(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed && Date.now() < deadline) await this.waitForData(deadline - Date.now());
    return this.closed;
  }
}

export async function connect(server) {
  const c = new RawConnection(server.port);
  await c.connected;
  return c;
}

// A request's bytes: `headers` as [name, value] pairs after Host.
export function request(method, target, { body = '', headers = [], host = true } = {}) {
  let head = `${method} ${target} HTTP/1.1\r\n`;
  if (host) head += 'Host: localhost\r\n';
  for (const [k, v] of headers) head += `${k}: ${v}\r\n`;
  return head + '\r\n' + body;
}

// A JSON POST with its Content-Length.
export function postJson(target, obj, headers = []) {
  const body = typeof obj === 'string' ? obj : JSON.stringify(obj);
  return request('POST', target, {
    body,
    headers: [['Content-Type', 'application/json'], ['Content-Length', String(Buffer.byteLength(body))], ...headers],
  });
}

// Resident memory of a process (bytes), from /proc.
export function rssBytes(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /VmRSS:\s+(\d+) kB/.exec(status);
  return m ? Number(m[1]) * 1024 : 0;
}
