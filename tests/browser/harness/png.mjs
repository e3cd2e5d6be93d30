// Stacks PNG screenshots into one picture, top to bottom (node:zlib only): the WebKit driver
// takes a page taller than WebKitGTK can paint in one window as several screenshots. Reads the
// PNGs a browser writes — 8 bits per channel, grey, RGB or RGBA, not interlaced — and writes one
// of the same kind, every row unfiltered.
import { deflateSync, inflateSync } from 'node:zlib';

const SIGNATURE = Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]);
const CHANNELS = { 0: 1, 2: 3, 4: 2, 6: 4 };  // colour type → channels

function decode(png) {
  if (!png.subarray(0, 8).equals(SIGNATURE)) throw new Error('stackPngs: not a PNG');
  let header = null;
  const data = [];
  for (let at = 8; at < png.length;) {
    const length = png.readUInt32BE(at), type = png.toString('latin1', at + 4, at + 8);
    const body = png.subarray(at + 8, at + 8 + length);
    if (type === 'IHDR') {
      header = { width: body.readUInt32BE(0), height: body.readUInt32BE(4), depth: body[8], colour: body[9], interlace: body[12] };
    }
    if (type === 'IDAT') data.push(body);
    if (type === 'IEND') break;
    at += 12 + length;
  }
  const channels = CHANNELS[header?.colour];
  if (!header || header.depth !== 8 || !channels || header.interlace !== 0) {
    throw new Error(`stackPngs: a PNG of 8 bits per channel, not interlaced, was expected, got ${JSON.stringify(header)}`);
  }
  const { width, height } = header;
  const stride = width * channels;
  const filtered = inflateSync(Buffer.concat(data));
  const pixels = Buffer.alloc(stride * height);
  // Undo each row's filter (PNG spec, section 9): 0 none, 1 sub, 2 up, 3 average, 4 Paeth.
  for (let y = 0; y < height; y++) {
    const filter = filtered[y * (stride + 1)];
    const row = filtered.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const out = pixels.subarray(y * stride, (y + 1) * stride);
    const up = y > 0 ? pixels.subarray((y - 1) * stride, y * stride) : Buffer.alloc(stride);
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? out[x - channels] : 0, b = up[x], c = x >= channels ? up[x - channels] : 0;
      let predicted = 0;
      if (filter === 1) predicted = a;
      else if (filter === 2) predicted = b;
      else if (filter === 3) predicted = (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        predicted = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      } else if (filter !== 0) throw new Error(`stackPngs: unknown row filter ${filter}`);
      out[x] = row[x] + predicted;
    }
  }
  return { width, height, colour: header.colour, stride, pixels };
}

function chunk(type, body) {
  const out = Buffer.alloc(12 + body.length);
  out.writeUInt32BE(body.length, 0);
  out.write(type, 4, 'latin1');
  body.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + body.length)), 8 + body.length);
  return out;
}

let table = null;
function crc32(bytes) {
  table ??= Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  let crc = 0xffffffff;
  for (const byte of bytes) crc = table[(crc ^ byte) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

// parts: [{ png: Buffer, skip = 0 }] — each PNG without its first `skip` rows (where it repeats
// the one above), stacked in order. All must have the same width and colour type.
export function stackPngs(parts) {
  const images = parts.map(({ png, skip = 0 }) => ({ ...decode(png), skip }));
  const { width, colour, stride } = images[0];
  if (images.some((im) => im.width !== width || im.colour !== colour)) throw new Error('stackPngs: the PNGs differ in width or colour type');
  const rows = images.flatMap((im) => Array.from({ length: im.height - im.skip }, (_, y) => im.pixels.subarray((im.skip + y) * stride, (im.skip + y + 1) * stride)));
  const raw = Buffer.concat(rows.flatMap((row) => [Buffer.from([0]), row]));
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(rows.length, 4);
  header[8] = 8;
  header[9] = colour;
  return Buffer.concat([SIGNATURE, chunk('IHDR', header), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}
