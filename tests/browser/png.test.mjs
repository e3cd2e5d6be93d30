// The harness's PNG stacking (harness/png.mjs), which makes WebKitGTK's full-page screenshots of
// long pages: PNGs written here with every row filter and colour type it reads, stacked, give
// the rows of each in order, without the rows skipped, in a PNG whose chunks carry valid CRCs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deflateSync, inflateSync } from 'node:zlib';
import { stackPngs } from './harness/png.mjs';

const SIGNATURE = [137, 80, 78, 71, 13, 10, 26, 10];

// A PNG of `rows` (arrays of bytes), row y written with filter filters[y % filters.length].
function png(width, colour, channels, rows, filters) {
  const stride = width * channels;
  const encoded = rows.flatMap((row, y) => {
    const filter = filters[y % filters.length];
    const up = y > 0 ? rows[y - 1] : new Array(stride).fill(0);
    return [filter, ...row.map((v, x) => {
      const a = x >= channels ? row[x - channels] : 0, b = up[x], c = x >= channels ? up[x - channels] : 0;
      const p = a + b - c;
      const paeth = Math.abs(p - a) <= Math.abs(p - b) && Math.abs(p - a) <= Math.abs(p - c) ? a : Math.abs(p - b) <= Math.abs(p - c) ? b : c;
      return (v - [0, a, b, (a + b) >> 1, paeth][filter] + 256) & 255;
    })];
  });
  const chunk = (type, body) => {
    const out = Buffer.alloc(12 + body.length);
    out.writeUInt32BE(body.length, 0);
    out.write(type, 4, 'latin1');
    body.copy(out, 8);  // the CRC is left 0: the reader does not check it
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(rows.length, 4);
  header[8] = 8;
  header[9] = colour;
  return Buffer.concat([Buffer.from(SIGNATURE), chunk('IHDR', header), chunk('IDAT', deflateSync(Buffer.from(encoded))), chunk('IEND', Buffer.alloc(0))]);
}

// The chunks of a PNG: [{ type, body, crc }].
function chunks(bytes) {
  const out = [];
  for (let at = 8; at < bytes.length; at += 12 + bytes.readUInt32BE(at)) {
    const length = bytes.readUInt32BE(at);
    out.push({ type: bytes.toString('latin1', at + 4, at + 8), body: bytes.subarray(at + 8, at + 8 + length), crc: bytes.readUInt32BE(at + 8 + length) });
  }
  return out;
}

const random = (seed) => () => { seed = (seed * 1103515245 + 12345) >>> 0; return seed >>> 24; };

test('stackPngs: rows of every filter and colour type, in order, the skipped rows left out', () => {
  for (const [colour, channels] of [[0, 1], [2, 3], [4, 2], [6, 4]]) {
    const next = random(colour + 1);
    const width = 7;
    const image = (height) => Array.from({ length: height }, () => Array.from({ length: width * channels }, next));
    const [a, b, c] = [image(5), image(6), image(4)];
    const out = stackPngs([{ png: png(width, colour, channels, a, [0, 1, 2, 3, 4]) },
      { png: png(width, colour, channels, b, [4, 3, 2, 1, 0]), skip: 2 }, { png: png(width, colour, channels, c, [2, 4]), skip: 0 }]);
    assert.deepEqual([...out.subarray(0, 8)], SIGNATURE);
    const parts = chunks(out);
    assert.deepEqual(parts.map((p) => p.type), ['IHDR', 'IDAT', 'IEND']);
    assert.equal(parts[2].crc, 0xae426082, 'the CRC of IEND (the same in every PNG)');
    const header = parts[0].body;
    assert.deepEqual([header.readUInt32BE(0), header.readUInt32BE(4), header[8], header[9]], [width, 5 + 4 + 4, 8, colour]);
    const raw = inflateSync(parts[1].body);
    const stride = width * channels;
    const rows = Array.from({ length: 13 }, (_, y) => [...raw.subarray(y * (stride + 1), (y + 1) * (stride + 1))]);
    assert.ok(rows.every((r) => r[0] === 0), 'rows written unfiltered');
    assert.deepEqual(rows.map((r) => r.slice(1)), [...a, ...b.slice(2), ...c], `colour type ${colour}`);
  }
});

test('stackPngs refuses what it cannot read', () => {
  const rows = [[1, 2, 3]];
  assert.throws(() => stackPngs([{ png: Buffer.from('not a png') }]), /stackPngs: not a PNG/);
  const sixteenBit = png(1, 2, 3, rows, [0]);
  sixteenBit[8 + 8 + 8] = 16;  // IHDR's bit depth
  assert.throws(() => stackPngs([{ png: sixteenBit }]), /8 bits per channel/);
  assert.throws(() => stackPngs([{ png: png(1, 2, 3, rows, [0]) }, { png: png(1, 0, 1, [[1]], [0]) }]), /differ in width or colour type/);
});
