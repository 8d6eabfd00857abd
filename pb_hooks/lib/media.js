// Cheap container sniffing for intake: what the first bytes can tell.
// Decoding problems (corrupt streams, no audio track) are found by the
// pipeline's normalize step and end in a halt with a code.

function ascii(bytes, from, len) {
  let s = "";
  for (let i = from; i < from + len && i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
  return s;
}

function startsWith(bytes, sig, at) {
  const off = at || 0;
  if (bytes.length < off + sig.length) return false;
  for (let i = 0; i < sig.length; i++) if (bytes[off + i] !== sig[i]) return false;
  return true;
}

// Returns a short container name, or "" when the bytes match no known
// audio/video container.
function sniff(bytes) {
  const b = bytes;
  if (ascii(b, 0, 4) === "RIFF" && ["WAVE", "AVI ", "RMP3"].indexOf(ascii(b, 8, 4)) >= 0) return "riff";
  if (ascii(b, 0, 4) === "RF64" || ascii(b, 0, 4) === "BW64") return "wav64";
  if (ascii(b, 0, 4) === "fLaC") return "flac";
  if (ascii(b, 0, 4) === "OggS") return "ogg";
  if (ascii(b, 0, 3) === "ID3") return "mp3";
  if (ascii(b, 4, 4) === "ftyp") return "mp4";
  if (startsWith(b, [0x1a, 0x45, 0xdf, 0xa3])) return "matroska";
  if (ascii(b, 0, 4) === "FORM" && ["AIFF", "AIFC"].indexOf(ascii(b, 8, 4)) >= 0) return "aiff";
  if (ascii(b, 0, 5) === "#!AMR") return "amr";
  if (ascii(b, 0, 4) === "caff") return "caf";
  if (ascii(b, 0, 4) === ".snd") return "au";
  if (ascii(b, 0, 4) === "wvpk") return "wavpack";
  if (ascii(b, 0, 4) === "MAC ") return "ape";
  if (ascii(b, 0, 3) === "FLV") return "flv";
  if (startsWith(b, [0x30, 0x26, 0xb2, 0x75, 0x8e, 0x66, 0xcf, 0x11])) return "asf";
  if (startsWith(b, [0x00, 0x00, 0x01, 0xba])) return "mpeg-ps";
  if (b.length > 188 && b[0] === 0x47 && b[188] === 0x47) return "mpeg-ts";
  // MPEG audio frame / ADTS: 11 sync bits; layer bits 00 only for ADTS (AAC).
  if (b.length >= 2 && b[0] === 0xff && (b[1] & 0xe0) === 0xe0) {
    const version = (b[1] >> 3) & 0x03;
    const layer = (b[1] >> 1) & 0x03;
    if (layer !== 0 && version !== 1) return "mpeg-audio";
    if (layer === 0 && (b[1] & 0xf6) === 0xf0) return "adts";
  }
  return "";
}


// ---------------------------------------------------------------------------
// H4: how long a recording says it is, read from its container's header at
// intake (a few reads of a few KB, never a decode), so that its audio can be
// reserved against the sender's daily quota before any is spent. A header
// can lie or say nothing: normalize measures the decoded length and halts a
// recording whose true length breaks the quota before any recognition.
// Each reader returns milliseconds, or null when the header does not say.

const HEAD = 64 * 1024;

// No field of a header may make intake loop, read or allocate more than
// the file itself justifies. Every read goes through a `source` that never reads
// past the file's end, at most HEAD bytes at a time and READS reads in all (a
// real header needs a few dozen); every loop moves forward by at least a byte of
// the file; a length no recording intake takes could have is refused.
const READS = 4096;
// A length no upload could hold (1 TiB; EBML's "unknown size" is told apart).
const ABSURD = Math.pow(2, 40);

// A header no real file has (a length past what holds it, a fixed-width field
// grown huge): intake refuses the upload as not readable audio (415).
class Malformed extends Error {
  constructor(message) {
    super(message);
    this.malformed = true;
  }
}

// The read budget spent: the header does not say (never a refusal: the file may be fine).
class Exhausted extends Error {}

function source(reader, size) {
  let reads = 0;
  return {
    // Bytes [at, at + n) of the file: fewer at its end, none past it.
    bytes(at, n) {
      if (!(at >= 0 && at < size) || !(n > 0)) return [];
      if (++reads > READS) throw new Exhausted("more than " + READS + " header reads");
      reader.seek(at, 0);
      return toBytes(reader, Math.min(n, HEAD, size - at));
    },
  };
}

function bytesAt(src, at, n) {
  return src.bytes(at, n);
}

// A declared length that no upload could hold, named for the refusal.
function bounded(len, what) {
  if (len >= ABSURD) throw new Malformed(what + " declares " + len + " bytes, more than any upload holds");
  return len;
}

function u16le(b, i) { return b[i] | (b[i + 1] << 8); }
function u32le(b, i) { return (b[i] | (b[i + 1] << 8) | (b[i + 2] << 16)) + b[i + 3] * 16777216; }
function u32be(b, i) { return b[i] * 16777216 + ((b[i + 1] << 16) | (b[i + 2] << 8) | b[i + 3]); }
function u64be(b, i) { return u32be(b, i) * 4294967296 + u32be(b, i + 4); }

function ms(value) {
  return isFinite(value) && value > 0 ? Math.ceil(value) : null;
}

// WAV (RIFF, RF64, BW64): the data chunk's bytes at the format's byte rate;
// bytes the file does not hold are not counted (a streamed WAV leaves its sizes unset).
function wavMs(src, size) {
  let at = 12;
  let byteRate = 0;
  for (let i = 0; i < 64 && at + 8 <= size; i++) {
    const h = bytesAt(src, at, 24);
    const id = ascii(h, 0, 4);
    const len = u32le(h, 4);
    if (id === "fmt " && h.length >= 20) byteRate = u32le(h, 16);
    if (id === "data") {
      const held = size - at - 8;
      const data = len === 0 || len === 0xffffffff || len > held ? held : len;
      return byteRate > 0 ? ms(data / byteRate * 1000) : null;
    }
    at += 8 + len + (len % 2);
  }
  return null;
}

// FLAC's STREAMINFO: total samples at the sample rate (0 samples: not said).
function flacInfoMs(b, i) {
  if (b.length < i + 18) return null;
  const rate = (b[i + 10] << 12) | (b[i + 11] << 4) | (b[i + 12] >> 4);
  const samples = (b[i + 13] & 0x0f) * 4294967296 + u32be(b, i + 14);
  return rate > 0 && samples > 0 ? ms(samples / rate * 1000) : null;
}

// AIFF/AIFC: COMM's sample frames at its sample rate (an 80-bit float).
function aiffMs(src, size) {
  let at = 12;
  for (let i = 0; i < 64 && at + 8 <= size; i++) {
    const h = bytesAt(src, at, 26);
    const len = u32be(h, 4);
    if (ascii(h, 0, 4) === "COMM" && h.length >= 26) {
      const frames = u32be(h, 10);
      const exponent = (((h[16] & 0x7f) << 8) | h[17]) - 16383;
      const rate = u64be(h, 18) * Math.pow(2, exponent - 63);
      return rate > 0 ? ms(frames / rate * 1000) : null;
    }
    at += 8 + len + (len % 2);
  }
  return null;
}

// Sun/NeXT .au: the data's bytes at rate × channels × bytes a sample.
function auMs(b, size) {
  if (b.length < 24) return null;
  const offset = u32be(b, 4);
  const sizeField = u32be(b, 8);
  const width = { 1: 1, 2: 1, 3: 2, 4: 3, 5: 4, 6: 4, 7: 8, 27: 1 }[u32be(b, 12)];
  const rate = u32be(b, 16);
  const channels = u32be(b, 20);
  if (!width || !rate || !channels || offset > size) return null;
  const held = size - offset;
  const data = sizeField === 0xffffffff || sizeField > held ? held : sizeField;
  return ms(data / (rate * channels * width) * 1000);
}

// Ogg: the last page's granule position of the first stream, at its codec's rate.
function oggMs(src, b, size) {
  if (b.length < 28) return null;
  const serial = u32le(b, 14);
  const p = 27 + b[26]; // the first packet, after the segment table
  let rate = 0;
  let skip = 0;
  if (ascii(b, p, 8) === "OpusHead") {
    rate = 48000;
    skip = u16le(b, p + 10);
  } else if (b[p] === 1 && ascii(b, p + 1, 6) === "vorbis") {
    rate = u32le(b, p + 12);
  } else if (b[p] === 0x7f && ascii(b, p + 1, 4) === "FLAC") {
    // the mapping's header, then "fLaC" and the STREAMINFO block (its header, then the rate at byte 10)
    const info = p + 13 + 4;
    rate = (b[info + 10] << 12) | (b[info + 11] << 4) | (b[info + 12] >> 4);
  } else if (ascii(b, p, 8) === "Speex   ") {
    rate = u32le(b, p + 36);
  }
  return rate > 0 ? lastGranuleMs(src, size, serial, rate, skip) : null;
}

function lastGranuleMs(src, size, serial, rate, skip) {
  if (!(rate > 0)) return null;
  const from = Math.max(0, size - HEAD);
  const t = bytesAt(src, from, HEAD);
  for (let i = t.length - 27; i >= 0; i--) {
    if (t[i] === 0x4f && ascii(t, i, 4) === "OggS" && u32le(t, i + 14) === serial) {
      const lo = u32le(t, i + 6);
      const hi = u32le(t, i + 10);
      if (lo === 0xffffffff && hi === 0xffffffff) continue; // no packet ends on this page
      return ms((hi * 4294967296 + lo - skip) / rate * 1000);
    }
  }
  return null;
}

// MPEG audio (MP3): a Xing/Info or VBRI header's frame count, else the bytes at the first frame's bit rate.
const MPEG_RATES = { 3: [44100, 48000, 32000], 2: [22050, 24000, 16000], 0: [11025, 12000, 8000] };
const MPEG_KBPS = {
  "1-3": [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
  "1-2": [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
  "1-1": [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  "2-3": [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
  "2-2": [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
  "2-1": [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};

function mpegMs(b, size) {
  let start = 0;
  if (ascii(b, 0, 3) === "ID3" && b.length >= 10) {
    start = 10 + ((b[6] & 0x7f) << 21 | (b[7] & 0x7f) << 14 | (b[8] & 0x7f) << 7 | (b[9] & 0x7f)) + (b[5] & 0x10 ? 10 : 0);
  }
  for (let i = start; i + 4 <= b.length && i < start + 4096; i++) {
    if (b[i] !== 0xff || (b[i + 1] & 0xe0) !== 0xe0) continue;
    const version = (b[i + 1] >> 3) & 3; // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
    const layer = (b[i + 1] >> 1) & 3; // 3: layer I, 2: layer II, 1: layer III
    const kbpsIndex = b[i + 2] >> 4;
    const rateIndex = (b[i + 2] >> 2) & 3;
    if (version === 1 || layer === 0 || kbpsIndex === 0 || kbpsIndex === 15 || rateIndex === 3) continue;
    const rate = MPEG_RATES[version][rateIndex];
    const kbps = MPEG_KBPS[(version === 3 ? "1-" : "2-") + layer][kbpsIndex];
    const perFrame = layer === 3 ? 384 : layer === 2 || version === 3 ? 1152 : 576;
    const mono = (b[i + 3] >> 6) === 3;
    const side = version === 3 ? (mono ? 17 : 32) : (mono ? 9 : 17);
    const x = i + 4 + side;
    const tag = ascii(b, x, 4);
    if ((tag === "Xing" || tag === "Info") && b.length >= x + 12 && (b[x + 7] & 1)) {
      return ms(u32be(b, x + 8) * perFrame / rate * 1000);
    }
    if (ascii(b, i + 36, 4) === "VBRI" && b.length >= i + 54) {
      return ms(u32be(b, i + 50) * perFrame / rate * 1000);
    }
    return ms((size - i) * 8 / kbps);
  }
  return null;
}

// MP4/M4A/MOV: moov's mvhd, its duration in its time scale (the moov may sit at the file's end).
function mp4Ms(src, size) {
  let at = 0;
  for (let i = 0; i < 64 && at + 8 <= size; i++) {
    const box = boxAt(src, at, size);
    if (!box) return null;
    if (box.type === "moov") return mvhdMs(bytesAt(src, box.body, Math.min(HEAD, box.end - box.body)));
    at = box.end;
  }
  return null;
}

function mvhdMs(moov) {
  let at = 0;
  while (at + 8 <= moov.length) {
    const len = u32be(moov, at);
    if (ascii(moov, at + 4, 4) === "mvhd") {
      const v = at + 8;
      const version = moov[v];
      const scale = version === 1 ? u32be(moov, v + 20) : u32be(moov, v + 12);
      const duration = version === 1 ? u64be(moov, v + 24) : u32be(moov, v + 16);
      if (duration === 0xffffffff || scale === 0) return null;
      return ms(duration / scale * 1000);
    }
    if (len < 8) return null;
    at += len;
  }
  return null;
}

// Matroska/WebM: the Segment's Info, its Duration in TimecodeScale units (a
// browser's recording often leaves it out: then nothing is said).
function ebmlVint(b, i, keepMarker) {
  const first = b[i];
  let width = 1;
  while (width <= 8 && !(first & (0x80 >> (width - 1)))) width++;
  if (width > 8 || i + width > b.length) return null;
  let value = keepMarker ? first : first & (0xff >> width);
  let allOnes = value === (0xff >> width);
  for (let k = 1; k < width; k++) {
    value = value * 256 + b[i + k];
    if (b[i + k] !== 0xff) allOnes = false;
  }
  return { value: value, width: width, unknown: !keepMarker && allOnes };
}

// An element's size at `i`: a vint, of which all ones means "unknown" (a live recording's Segment).
function ebmlSize(b, i) {
  const len = ebmlVint(b, i, false);
  if (len && !len.unknown) bounded(len.value, "a Matroska element");
  return len;
}

function ebmlFloat(b, i, n) {
  const raw = new Uint8Array(n);
  for (let k = 0; k < n; k++) raw[k] = b[i + k];
  const view = new DataView(raw.buffer);
  return n === 4 ? view.getFloat32(0) : view.getFloat64(0);
}

// The elements read here whose values the format keeps to 8 bytes at most (numbers).
const EBML_NUMBERS = { 0x2ad7b1: "TimecodeScale", 0x4489: "Duration", 0x83: "TrackType" };

// The elements inside a master element's body [from, to) of `b`, each given to
// visit(id, body, end) until it returns something other than undefined (returned
// here). `sized`: `to` is the parent's own declared end, within `b`, so a child
// running past it is malformed; otherwise `to` is where the bytes read end and the
// walk stops at a child they do not hold. Each step passes at least two bytes.
function ebmlChildren(b, from, to, sized, visit) {
  for (let i = from; i < to;) {
    const id = ebmlVint(b, i, true);
    const len = id && ebmlSize(b, i + id.width);
    if (!id || !len) return undefined;
    const number = EBML_NUMBERS[id.value];
    if (number && (len.unknown || len.value > 8)) {
      throw new Malformed("the Matroska " + number + " declares " + (len.unknown ? "an unknown size" : len.value + " bytes") +
        "; the format allows at most 8");
    }
    const body = i + id.width + len.width;
    const end = len.unknown ? to : body + len.value;
    if (end > to) {
      if (sized) throw new Malformed("a Matroska element of " + len.value + " bytes runs past the element holding it");
      return undefined;
    }
    const found = visit(id.value, body, end);
    if (found !== undefined) return found;
    i = end;
  }
  return undefined;
}

// An unsigned integer element of `n` bytes (8 at most: ebmlChildren saw to it).
function ebmlUint(b, body, n) {
  let value = 0;
  for (let k = 0; k < n; k++) value = value * 256 + b[body + k];
  return value;
}

// The body of the first element `want` among the Segment's children (the header's
// part of them, in `b`): {body, to, sized}, or null when a Cluster comes first.
function segmentChild(b, want) {
  let i = 0;
  let inSegment = false;
  for (let guard = 0; guard < 256 && i < b.length; guard++) {
    const id = ebmlVint(b, i, true);
    const len = id && ebmlSize(b, i + id.width);
    if (!id || !len) return null;
    const body = i + id.width + len.width;
    if (id.value === 0x18538067) { // Segment: look inside
      inSegment = true;
      i = body;
      continue;
    }
    if (inSegment && id.value === want) {
      const sized = !len.unknown && body + len.value <= b.length;
      return { body: body, to: sized ? body + len.value : b.length, sized: sized };
    }
    if (id.value === 0x1f43b675 || len.unknown) return null; // a Cluster first
    i = body + len.value;
  }
  return null;
}

function matroskaMs(b) {
  const info = segmentChild(b, 0x1549a966);
  return info ? infoMs(b, info.body, info.to, info.sized) : null;
}

function infoMs(b, from, to, sized) {
  let scale = 1000000;
  let duration = null;
  ebmlChildren(b, from, to, sized, (id, body, end) => {
    if (id === 0x2ad7b1) scale = ebmlUint(b, body, end - body);
    if (id === 0x4489 && (end - body === 4 || end - body === 8)) duration = ebmlFloat(b, body, end - body);
  });
  return duration === null ? null : ms(duration * scale / 1000000);
}

// AMR (narrow and wide band): 20 ms frames whose size the first frame's mode gives.
const AMR_FRAME = { nb: [13, 14, 16, 18, 20, 21, 27, 32], wb: [18, 24, 33, 37, 41, 47, 51, 59, 61] };

function amrMs(b, size) {
  const wide = ascii(b, 0, 9) === "#!AMR-WB\n";
  const at = wide ? 9 : 6;
  if (b.length <= at) return null;
  const frame = (wide ? AMR_FRAME.wb : AMR_FRAME.nb)[(b[at] >> 3) & 0x0f];
  return frame ? ms((size - at) / frame * 20) : null;
}

// ---------------------------------------------------------------------------
// What a browser plays. The sender's page plays the audio beside its
// transcript; an original a browser cannot play gets a playable copy at
// normalize (Ogg/Opus, files role `playable`). The verdict is intake's, from
// the container and, where the container alone does not decide (WAV, Ogg,
// MP3, MP4/MOV, Matroska/WebM), the codec inside it, read from the header.
// Measured in Chromium 156 (an <audio> element's play() on files of each
// kind): these play; AIFF, AU, AMR, CAF, WavPack, APE, FLV, ASF, MPEG-PS/TS,
// ALAC, AMR in 3GP, AC-3, MP2, ADPCM, 64-bit float PCM and Speex do not. A
// codec that could not be read counts as not playable: a wrong "no" costs a
// small copy, a wrong "yes" leaves the sender nothing to play.
const PLAYS = {
  riff: ["pcm_u8", "pcm_s16le", "pcm_s24le", "pcm_s32le", "pcm_f32le", "pcm_alaw", "pcm_mulaw", "mp3"],
  wav64: ["pcm_u8", "pcm_s16le", "pcm_s24le", "pcm_s32le", "pcm_f32le", "pcm_alaw", "pcm_mulaw", "mp3"],
  flac: ["flac"],
  adts: ["aac"],
  mp3: ["mp3"],
  "mpeg-audio": ["mp3"],
  ogg: ["opus", "vorbis", "flac"],
  mp4: ["mp4a", "opus", "flac", ".mp3", "sowt", "twos", "alaw", "ulaw"],
};
// Matroska and WebM name their codecs by CodecID (lowercased here); these prefixes play.
const MATROSKA_PLAYS = ["a_opus", "a_vorbis", "a_aac", "a_flac", "a_mpeg/l3", "a_pcm/int/lit", "a_pcm/float/ieee"];

// Whether a browser plays a file of `container` (sniff()'s name) holding `codec` (codecOf()'s).
function browserPlays(container, codec) {
  if (codec === "") return false;
  if (container === "matroska") return MATROSKA_PLAYS.some((p) => codec.indexOf(p) === 0);
  return (PLAYS[container] || []).indexOf(codec) >= 0;
}

// WAVE's format tags (the fmt chunk; WAVE_FORMAT_EXTENSIBLE's sub-format alike).
const WAV_TAGS = { 2: "adpcm_ms", 6: "pcm_alaw", 7: "pcm_mulaw", 0x11: "adpcm_ima_wav", 0x31: "gsm_ms", 0x50: "mp2", 0x55: "mp3" };

function wavCodec(src, size) {
  let at = 12;
  for (let i = 0; i < 64 && at + 8 <= size; i++) {
    const h = bytesAt(src, at, 8 + 40);
    const id = ascii(h, 0, 4);
    const len = u32le(h, 4);
    if (id === "fmt " && h.length >= 8 + 16) {
      let tag = u16le(h, 8);
      const bits = u16le(h, 8 + 14);
      if (tag === 0xfffe && h.length >= 8 + 26) tag = u16le(h, 8 + 24);
      if (tag === 1) return bits === 8 ? "pcm_u8" : "pcm_s" + bits + "le";
      if (tag === 3) return "pcm_f" + bits + "le";
      return WAV_TAGS[tag] || "wav_0x" + tag.toString(16);
    }
    if (id === "data") return "";
    at += 8 + len + (len % 2);
  }
  return "";
}

// Ogg: the first stream's first packet names its codec.
function oggCodec(b) {
  if (b.length < 28) return "";
  const p = 27 + b[26];
  if (ascii(b, p, 8) === "OpusHead") return "opus";
  if (b[p] === 1 && ascii(b, p + 1, 6) === "vorbis") return "vorbis";
  if (b[p] === 0x7f && ascii(b, p + 1, 4) === "FLAC") return "flac";
  if (ascii(b, p, 8) === "Speex   ") return "speex";
  if (b[p] === 0x80 && ascii(b, p + 1, 6) === "theora") return "theora";
  return "";
}

// MPEG audio: the first frame's layer (after an ID3 tag, which may outgrow the head).
function mpegCodec(src, b) {
  let start = 0;
  if (ascii(b, 0, 3) === "ID3" && b.length >= 10) {
    start = 10 + ((b[6] & 0x7f) << 21 | (b[7] & 0x7f) << 14 | (b[8] & 0x7f) << 7 | (b[9] & 0x7f)) + (b[5] & 0x10 ? 10 : 0);
  }
  const f = bytesAt(src, start, 4096);
  for (let i = 0; i + 4 <= f.length; i++) {
    if (f[i] !== 0xff || (f[i + 1] & 0xe0) !== 0xe0) continue;
    const version = (f[i + 1] >> 3) & 3;
    const layer = (f[i + 1] >> 1) & 3;
    const kbpsIndex = f[i + 2] >> 4;
    if (version === 1 || layer === 0 || kbpsIndex === 15 || ((f[i + 2] >> 2) & 3) === 3) continue;
    return ["", "mp3", "mp2", "mp1"][layer];
  }
  return "";
}

// An ISO BMFF box at `at` (not past `end`): {type, body, end}, or null when the bytes end first.
function boxAt(src, at, end) {
  const h = bytesAt(src, at, 16);
  if (h.length < 8) return null;
  let len = u32be(h, 0);
  let head = 8;
  if (len === 1) {
    if (h.length < 16) return null;
    len = bounded(u64be(h, 8), "an MP4 box");
    head = 16;
  } else if (len === 0) {
    len = end - at; // to the end
  }
  if (len < head) throw new Malformed("an MP4 box declares " + len + " bytes, fewer than its own header");
  return { type: ascii(h, 4, 4), body: at + head, end: Math.min(end, at + len) };
}

function childBox(src, from, end, type) {
  for (let at = from, i = 0; i < 256 && at + 8 <= end; i++) {
    const box = boxAt(src, at, end);
    if (!box) return null;
    if (box.type === type) return box;
    at = box.end;
  }
  return null;
}

// MP4/M4A/MOV/3GP: the sample entry of the first sound track (moov/trak/mdia/minf/stbl/stsd),
// its four letters lowercased: mp4a (AAC, or MP3), opus, flac, alac, samr (AMR), sowt (PCM), …
function mp4Codec(src, size) {
  const moov = childBox(src, 0, size, "moov");
  if (!moov) return "";
  for (let at = moov.body, i = 0; i < 64 && at + 8 <= moov.end; i++) {
    const trak = boxAt(src, at, moov.end);
    if (!trak) return "";
    if (trak.type === "trak") {
      const mdia = childBox(src, trak.body, trak.end, "mdia");
      const hdlr = mdia && childBox(src, mdia.body, mdia.end, "hdlr");
      if (hdlr && ascii(bytesAt(src, hdlr.body + 8, 4), 0, 4) === "soun") {
        const minf = childBox(src, mdia.body, mdia.end, "minf");
        const stbl = minf && childBox(src, minf.body, minf.end, "stbl");
        const stsd = stbl && childBox(src, stbl.body, stbl.end, "stsd");
        return stsd ? ascii(bytesAt(src, stsd.body + 8, 8), 4, 4).trim().toLowerCase() : "";
      }
    }
    at = trak.end;
  }
  return "";
}

// Matroska/WebM: the first audio track's CodecID (Segment/Tracks/TrackEntry), lowercased.
function matroskaCodec(b) {
  const tracks = segmentChild(b, 0x1654ae6b);
  if (!tracks) return "";
  const codec = ebmlChildren(b, tracks.body, tracks.to, tracks.sized, (id, body, end) => {
    if (id !== 0xae) return undefined; // TrackEntry: its TrackType (2: audio) and CodecID
    let type = 0;
    let name = "";
    ebmlChildren(b, body, end, end <= b.length, (cid, cbody, cend) => {
      if (cid === 0x83) type = ebmlUint(b, cbody, cend - cbody);
      if (cid === 0x86) name = ascii(b, cbody, Math.min(cend - cbody, 64)).toLowerCase();
    });
    return type === 2 ? name : undefined;
  });
  return codec || "";
}

// What each container's header says, read from the file's bounded `src` (source()), its
// `size` and its first HEAD bytes: `ms`, the length it declares (see above), and `codec`,
// the audio codec inside it (a short name, see above). A reader a container lacks: its
// header does not say, or the container alone decides.
const MPEG = { ms: (r, size, head) => mpegMs(head, size), codec: (r, size, head) => mpegCodec(r, head) };
const HEADERS = {
  riff: {
    ms: (r, size, head) => ascii(head, 8, 4) === "WAVE" ? wavMs(r, size) : null,
    codec: (r, size, head) => ascii(head, 8, 4) === "WAVE" ? wavCodec(r, size) : "",
  },
  wav64: { ms: wavMs, codec: wavCodec },
  flac: { ms: (r, size, head) => (head[4] & 0x7f) === 0 ? flacInfoMs(head, 8) : null, codec: () => "flac" },
  adts: { codec: () => "aac" },
  aiff: { ms: aiffMs },
  au: { ms: (r, size, head) => auMs(head, size) },
  ogg: { ms: (r, size, head) => oggMs(r, head, size), codec: (r, size, head) => oggCodec(head) },
  mp3: MPEG,
  "mpeg-audio": MPEG,
  mp4: { ms: mp4Ms, codec: mp4Codec },
  matroska: { ms: (r, size, head) => matroskaMs(head), codec: (r, size, head) => matroskaCodec(head) },
  amr: { ms: (r, size, head) => amrMs(head, size), codec: (r, size, head) => ascii(head, 0, 9) === "#!AMR-WB\n" ? "amr_wb" : "amr_nb" },
};

// What the header of `file` (of `container`, sniff()'s answer) says of `what` (HEADERS),
// or `none`: it does not say, or it is too broken to read (normalize will tell the rest).
// Throws a Malformed (`malformed` set) for a header no real file has.
function fromHeader(file, container, what, none) {
  const read = (HEADERS[container] || {})[what];
  if (!read) return none;
  const reader = file.reader.open();
  try {
    const src = source(reader, file.size);
    return read(src, file.size, bytesAt(src, 0, HEAD));
  } catch (err) {
    if (err && err.malformed) throw err;
    return none;
  } finally {
    reader.close();
  }
}

// The length `file` declares (ms), or null.
function declaredMs(file, container) {
  return fromHeader(file, container, "ms", null);
}

// The audio codec inside `file`, "" when the header does not say or the container alone
// decides. A codec that could not be read is not playable as it is.
function codecOf(file, container) {
  return fromHeader(file, container, "codec", "");
}

module.exports = { sniff: sniff, declaredMs: declaredMs, codecOf: codecOf, browserPlays: browserPlays, Malformed: Malformed };
