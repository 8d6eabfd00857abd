// A voice note from the microphone: MediaRecorder (WebM/Opus where the
// browser has it, MP4/AAC on Safari), handed over as a File when stopped.

const TYPES = ["audio/webm;codecs=opus", "audio/webm", "audio/ogg;codecs=opus", "audio/mp4"];

export function supported() {
  return Boolean(navigator.mediaDevices && navigator.mediaDevices.getUserMedia && window.MediaRecorder);
}

function typeAndExtension() {
  for (const type of TYPES) {
    if (MediaRecorder.isTypeSupported(type)) {
      return { type, ext: type.startsWith("audio/mp4") ? "m4a" : type.startsWith("audio/ogg") ? "ogg" : "webm" };
    }
  }
  return { type: "", ext: "webm" };
}

// Starts recording; resolves to {stop() → Promise<File>, cancel(), started} once the microphone is open.
export async function start() {
  const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  const { type, ext } = typeAndExtension();
  const recorder = new MediaRecorder(stream, type ? { mimeType: type } : undefined);
  const chunks = [];
  recorder.ondataavailable = (ev) => {
    if (ev.data && ev.data.size > 0) chunks.push(ev.data);
  };
  const release = () => stream.getTracks().forEach((track) => track.stop());
  const done = new Promise((resolve) => {
    recorder.onstop = () => {
      release();
      resolve();
    };
  });
  recorder.start(1000);
  const started = Date.now();
  return {
    started,
    async stop(name) {
      if (recorder.state !== "inactive") recorder.stop();
      await done;
      const mime = recorder.mimeType || type || "audio/webm";
      return new File(chunks, name + "." + ext, { type: mime.split(";")[0] });
    },
    cancel() {
      if (recorder.state !== "inactive") recorder.stop();
      chunks.length = 0;
      release();
    },
  };
}
