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

// Bytes [at, at + n) of the file (fewer at its end).
function bytesAt(reader, at, n) {
  reader.seek(at, 0);
  return toBytes(reader, n);
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
function wavMs(reader, size) {
  let at = 12;
  let byteRate = 0;
  for (let i = 0; i < 64 && at + 8 <= size; i++) {
    const h = bytesAt(reader, at, 24);
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
function aiffMs(reader, size) {
  let at = 12;
  for (let i = 0; i < 64 && at + 8 <= size; i++) {
    const h = bytesAt(reader, at, 26);
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
function oggMs(reader, b, size) {
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
  return rate > 0 ? lastGranuleMs(reader, size, serial, rate, skip) : null;
}

function lastGranuleMs(reader, size, serial, rate, skip) {
  if (!(rate > 0)) return null;
  const from = Math.max(0, size - HEAD);
  const t = bytesAt(reader, from, HEAD);
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
function mp4Ms(reader, size) {
  let at = 0;
  for (let i = 0; i < 64 && at + 8 <= size; i++) {
    const h = bytesAt(reader, at, 16);
    let len = u32be(h, 0);
    let head = 8;
    if (len === 1) {
      len = u64be(h, 8);
      head = 16;
    } else if (len === 0) {
      len = size - at;
    }
    if (ascii(h, 4, 4) === "moov") return mvhdMs(bytesAt(reader, at + head, Math.min(HEAD, len - head)));
    if (len < head) return null;
    at += len;
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

function ebmlFloat(b, i, n) {
  const raw = new Uint8Array(n);
  for (let k = 0; k < n; k++) raw[k] = b[i + k];
  const view = new DataView(raw.buffer);
  return n === 4 ? view.getFloat32(0) : view.getFloat64(0);
}

function matroskaMs(b) {
  let i = 0;
  let inSegment = false;
  for (let guard = 0; guard < 256 && i < b.length; guard++) {
    const id = ebmlVint(b, i, true);
    if (!id) return null;
    const len = ebmlVint(b, i + id.width, false);
    if (!len) return null;
    const body = i + id.width + len.width;
    if (id.value === 0x18538067) { // Segment: look inside
      inSegment = true;
      i = body;
      continue;
    }
    if (inSegment && id.value === 0x1549a966) return infoMs(b, body, Math.min(b.length, body + len.value));
    if (id.value === 0x1f43b675 || len.unknown) return null; // a Cluster before any Info
    i = body + len.value;
  }
  return null;
}

function infoMs(b, from, to) {
  let scale = 1000000;
  let duration = null;
  for (let i = from; i < to;) {
    const id = ebmlVint(b, i, true);
    const len = id && ebmlVint(b, i + id.width, false);
    if (!id || !len) return null;
    const body = i + id.width + len.width;
    if (id.value === 0x2ad7b1) {
      scale = 0;
      for (let k = 0; k < len.value; k++) scale = scale * 256 + b[body + k];
    }
    if (id.value === 0x4489 && (len.value === 4 || len.value === 8)) duration = ebmlFloat(b, body, len.value);
    i = body + len.value;
  }
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

function wavCodec(reader, size) {
  let at = 12;
  for (let i = 0; i < 64 && at + 8 <= size; i++) {
    const h = bytesAt(reader, at, 8 + 40);
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
function mpegCodec(reader, b) {
  let start = 0;
  if (ascii(b, 0, 3) === "ID3" && b.length >= 10) {
    start = 10 + ((b[6] & 0x7f) << 21 | (b[7] & 0x7f) << 14 | (b[8] & 0x7f) << 7 | (b[9] & 0x7f)) + (b[5] & 0x10 ? 10 : 0);
  }
  const f = bytesAt(reader, start, 4096);
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

// An ISO BMFF box at `at` (not past `end`): {type, body, end}, or null.
function boxAt(reader, at, end) {
  const h = bytesAt(reader, at, 16);
  if (h.length < 8) return null;
  let len = u32be(h, 0);
  let head = 8;
  if (len === 1) {
    if (h.length < 16) return null;
    len = u64be(h, 8);
    head = 16;
  } else if (len === 0) {
    len = end - at;
  }
  if (len < head) return null;
  return { type: ascii(h, 4, 4), body: at + head, end: Math.min(end, at + len) };
}

function childBox(reader, from, end, type) {
  for (let at = from, i = 0; i < 256 && at + 8 <= end; i++) {
    const box = boxAt(reader, at, end);
    if (!box) return null;
    if (box.type === type) return box;
    at = box.end;
  }
  return null;
}

// MP4/M4A/MOV/3GP: the sample entry of the first sound track (moov/trak/mdia/minf/stbl/stsd),
// its four letters lowercased: mp4a (AAC, or MP3), opus, flac, alac, samr (AMR), sowt (PCM), …
function mp4Codec(reader, size) {
  const moov = childBox(reader, 0, size, "moov");
  if (!moov) return "";
  for (let at = moov.body, i = 0; i < 64 && at + 8 <= moov.end; i++) {
    const trak = boxAt(reader, at, moov.end);
    if (!trak) return "";
    if (trak.type === "trak") {
      const mdia = childBox(reader, trak.body, trak.end, "mdia");
      const hdlr = mdia && childBox(reader, mdia.body, mdia.end, "hdlr");
      if (hdlr && ascii(bytesAt(reader, hdlr.body + 8, 4), 0, 4) === "soun") {
        const minf = childBox(reader, mdia.body, mdia.end, "minf");
        const stbl = minf && childBox(reader, minf.body, minf.end, "stbl");
        const stsd = stbl && childBox(reader, stbl.body, stbl.end, "stsd");
        return stsd ? ascii(bytesAt(reader, stsd.body + 8, 8), 4, 4).trim().toLowerCase() : "";
      }
    }
    at = trak.end;
  }
  return "";
}

// Matroska/WebM: the first audio track's CodecID (Segment/Tracks/TrackEntry), lowercased.
function matroskaCodec(b) {
  let i = 0;
  let inSegment = false;
  for (let guard = 0; guard < 256 && i < b.length; guard++) {
    const id = ebmlVint(b, i, true);
    const len = id && ebmlVint(b, i + id.width, false);
    if (!id || !len) return "";
    const body = i + id.width + len.width;
    if (id.value === 0x18538067) {
      inSegment = true;
      i = body;
      continue;
    }
    if (inSegment && id.value === 0x1654ae6b) {
      return tracksCodec(b, body, len.unknown ? b.length : Math.min(b.length, body + len.value));
    }
    if (id.value === 0x1f43b675 || len.unknown) return ""; // a Cluster before any Tracks
    i = body + len.value;
  }
  return "";
}

function tracksCodec(b, from, to) {
  for (let i = from; i < to;) {
    const id = ebmlVint(b, i, true);
    const len = id && ebmlVint(b, i + id.width, false);
    if (!id || !len) return "";
    const body = i + id.width + len.width;
    if (id.value === 0xae) { // TrackEntry: its TrackType (2: audio) and CodecID
      let type = 0;
      let codec = "";
      for (let k = body; k < Math.min(to, body + len.value);) {
        const cid = ebmlVint(b, k, true);
        const clen = cid && ebmlVint(b, k + cid.width, false);
        if (!cid || !clen) return "";
        const cbody = k + cid.width + clen.width;
        if (cid.value === 0x83) type = b[cbody + clen.value - 1];
        if (cid.value === 0x86) codec = ascii(b, cbody, Math.min(clen.value, 64)).toLowerCase();
        k = cbody + clen.value;
      }
      if (type === 2) return codec;
    }
    i = body + len.value;
  }
  return "";
}

// What each container's header says, read from the open `reader`, the file's `size` and
// its first HEAD bytes: `ms`, the length it declares (see above), and `codec`, the audio
// codec inside it (a short name, see above). A reader a container lacks: its header does
// not say, or the container alone decides.
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
function fromHeader(file, container, what, none) {
  const read = (HEADERS[container] || {})[what];
  if (!read) return none;
  const reader = file.reader.open();
  try {
    return read(reader, file.size, bytesAt(reader, 0, HEAD));
  } catch (_) {
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

module.exports = { sniff: sniff, declaredMs: declaredMs, codecOf: codecOf, browserPlays: browserPlays };
