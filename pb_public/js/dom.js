// The page's small DOM helpers: an element in one call, an account screen's form,
// a passing message, a button busy while it sends, and the numbers a person reads (a
// percentage, a time in a recording).

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

// The form of an account screen: a narrow card headed `title` (the heading, `{name}-title`, names the
// form), then `parts`, among them `error` (errorLine). On submit, `send()` runs in place of the
// browser's submit, the error line emptied first.
export function accountForm(name, title, error, parts, send) {
  const form = h("form", { class: "card narrow", "aria-labelledby": name + "-title" },
    h("h1", { id: name + "-title" }, title), ...parts);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    error.textContent = "";
    send();
  });
  return form;
}

export function errorLine(name) {
  return h("p", { class: "error", role: "alert", id: name + "-error" });
}

// An account's email address, labelled `label`: the form's `email`.
export function emailField(id, label) {
  return [
    h("label", { for: id }, label),
    h("input", { id, name: "email", type: "email", autocomplete: "username", required: true }),
  ];
}

export function toast(words) {
  const box = document.getElementById("toast");
  box.textContent = words;
  box.classList.add("shown");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => box.classList.remove("shown"), 6000);
}

// `send()` while `button` says `words` (and cannot be pressed again). A refusal goes to `refused(err)`,
// which says why; the button is back as it was, unless `refused` returns true (the page moved on).
// True once sent.
export async function sending(button, words, send, refused) {
  const before = button.textContent;
  button.disabled = true;
  button.textContent = words;
  try {
    await send();
    return true;
  } catch (err) {
    if (!refused(err)) {
      button.disabled = false;
      button.textContent = before;
    }
    return false;
  }
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
