// The page's small DOM helpers: an element in one call, a passing message, and
// the numbers a person reads (a percentage, a time in a recording).

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else if (name in el && typeof value !== "string") el[name] = value;
    else el.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function toast(words) {
  const box = document.getElementById("toast");
  box.textContent = words;
  box.classList.add("shown");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => box.classList.remove("shown"), 6000);
}

// A button that says it is busy until the function this returns is called.
export function busy(button, words) {
  const before = button.textContent;
  button.disabled = true;
  button.textContent = words;
  return () => {
    button.disabled = false;
    button.textContent = before;
  };
}

export function percent(p) {
  return Math.round(Math.min(Math.max(p, 0), 1) * 100);
}

export function stamp(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const hh = Math.floor(s / 3600);
  const mm = String(Math.floor((s % 3600) / 60)).padStart(2, "0");
  const ss = String(s % 60).padStart(2, "0");
  return (hh > 0 ? hh + ":" : "") + mm + ":" + ss;
}
