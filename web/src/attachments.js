// Attachments on the page (SPEC §11): an Attach button, an image pasted into the message box,
// files dropped on the composer. Each file is uploaded at once through the Files API
// (`POST /v1/files`) and shown as a pending thumbnail (images) or chip (other files) with a
// Remove button; the message names the uploaded files by `file_id`. A sent message shows its
// files: images as thumbnails whose bytes come from `GET /v1/files/{id}/content` with the
// page's own authorization, other files as a chip with name and size, a remote file (passed to
// the vendor as its URL, never stored) as a link. A refused file (413,
// 415) is dropped from the pending list with the server's reason.
import { api, apiJson, ApiError, describe } from "./api.js";
import { $, button, el, formatBytes } from "./dom.js";
import { hooks } from "./hooks.js";
import { notify } from "./ui.js";

const PURPOSE = "user_data";

// Pending files, in the order they were added: {file, node, upload: Promise, record}.
const pending = [];
let list = null;
let slot = null;

// The pending list (and its slot in the composer) shows only while there are files in it.
function showPending() {
  slot.hidden = pending.length === 0;
}

function isImage(mediaType) {
  return typeof mediaType === "string" && mediaType.startsWith("image/");
}

// A pasted image has a generic name (often `image.png`); give it a clearer one.
function nameOf(file) {
  return file.name || `pasted.${(file.type.split("/")[1] || "bin").replace(/[^a-z0-9]/gi, "")}`;
}

// An <img> showing `blob`; the object URL is released once the image has been decoded.
function thumbnail(blob, name) {
  const img = el("img", "thumb");
  img.alt = name;
  const url = URL.createObjectURL(blob);
  const release = () => URL.revokeObjectURL(url);
  img.addEventListener("load", release, { once: true });
  img.addEventListener("error", release, { once: true });
  img.src = url;
  return img;
}

// A remote file: a chip linking to where it lives (the page never loads it itself).
function link(name, url) {
  const node = el("span", "file-chip");
  const anchor = el("a", "file-name", name);
  anchor.href = url;
  anchor.target = "_blank";
  anchor.rel = "noopener noreferrer";
  node.append(anchor, el("span", "file-size", "link"));
  return node;
}

function chip(name, bytes, note) {
  const node = el("span", "file-chip");
  node.append(el("span", "file-name", name), el("span", "file-size", note || formatBytes(bytes)));
  return node;
}

// What the server says about a refused file, with what to do about it.
function refusal(name, error) {
  if (error instanceof ApiError && (error.status === 413 || error.status === 415)) {
    return `${name} was not attached (${error.status}): ${error.message}`;
  }
  return `${name} was not attached: ${describe(error)}`;
}

function remove(item, { focusNext } = {}) {
  const index = pending.indexOf(item);
  if (index < 0) return;
  pending.splice(index, 1);
  const next = pending[index] || pending[index - 1];
  item.node.remove();
  showPending();
  if (focusNext) (next ? next.node.querySelector(".remove") : $("prompt")).focus();
}

async function upload(item) {
  const form = new FormData();
  form.append("purpose", PURPOSE);
  form.append("file", item.file, item.name);
  try {
    item.record = await apiJson("/v1/files", { method: "POST", body: form });
  } catch (error) {
    remove(item);
    notify(refusal(item.name, error));
    return;
  }
  item.node.removeAttribute("aria-busy");
  item.node.querySelector(".file-size").textContent = formatBytes(item.record.bytes);
}

function add(file) {
  const item = { file, name: nameOf(file), record: null };
  const node = el("li", "attachment");
  node.setAttribute("aria-busy", "true");
  if (isImage(file.type)) node.append(thumbnail(file, item.name));
  node.append(chip(item.name, file.size, "uploading…"));
  const drop = button("remove", "×", `Remove ${item.name}`);
  drop.addEventListener("click", () => remove(item, { focusNext: true }));
  node.append(drop);
  item.node = node;
  pending.push(item);
  list.append(node);
  showPending();
  item.upload = upload(item);
}

function addAll(files) {
  if (!files || !files.length) return;
  notify("");
  for (const file of files) add(file);
}

// The uploaded files once every upload has ended (a refused one is no longer pending):
// `{file_id, name, media_type, bytes, file}` each.
async function collect() {
  await Promise.all(pending.map((item) => item.upload));
  return pending
    .filter((item) => item.record)
    .map((item) => ({
      file_id: item.record.id,
      name: item.record.filename,
      media_type: item.record.media_type,
      bytes: item.record.bytes,
      file: item.file,
    }));
}

function clear() {
  pending.splice(0, pending.length);
  if (list) { list.replaceChildren(); showPending(); }
}

// The files of a sent or stored message: thumbnails for images, chips for the others.
function show(attachments) {
  const box = el("ul", "message-files");
  box.setAttribute("aria-label", "Attached files");
  for (const attachment of attachments) {
    const item = el("li", "message-file");
    const name = attachment.name || "attachment";
    if (attachment.url && !attachment.file_id) {
      item.append(link(name, attachment.url));
    } else if (isImage(attachment.media_type)) {
      item.classList.add("image");
      if (attachment.file) item.append(thumbnail(attachment.file, name));
      else fetchThumbnail(item, attachment, name);
    } else {
      item.append(chip(name, attachment.bytes));
    }
    box.append(item);
  }
  return box;
}

// The stored image through the Files API, with the same authorization as the run.
async function fetchThumbnail(item, attachment, name) {
  try {
    const response = await api(`/v1/files/${encodeURIComponent(attachment.file_id)}/content`);
    item.append(thumbnail(await response.blob(), name));
  } catch (error) {
    const gone = error instanceof ApiError && error.status === 404;
    item.classList.remove("image");
    item.append(chip(name, attachment.bytes, gone ? "no longer stored" : "could not be loaded"));
  }
}

function mount(into) {
  slot = into;
  const input = el("input");
  input.type = "file";
  input.multiple = true;
  input.id = "attach-input";
  input.hidden = true;
  input.setAttribute("aria-label", "Files to attach");
  input.addEventListener("change", () => { addAll(Array.from(input.files)); input.value = ""; });
  const attach = button("attach", "Attach", "Attach files");
  attach.id = "attach";
  attach.title = "Attach files (or paste an image, or drop files here)";
  attach.addEventListener("click", () => input.click());
  $("prompt").before(attach, input);

  list = el("ul", "pending-files");
  list.id = "pending-files";
  list.setAttribute("aria-label", "Files to send with the message");
  slot.append(list);
  showPending();

  $("prompt").addEventListener("paste", (event) => {
    const files = Array.from((event.clipboardData && event.clipboardData.files) || []);
    if (!files.length) return;
    event.preventDefault();
    addAll(files);
  });
  const composer = $("composer");
  const carriesFiles = (event) => event.dataTransfer && Array.from(event.dataTransfer.types || []).includes("Files");
  composer.addEventListener("dragover", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "copy";
    composer.classList.add("dropping");
  });
  composer.addEventListener("dragleave", (event) => {
    if (!composer.contains(event.relatedTarget)) composer.classList.remove("dropping");
  });
  composer.addEventListener("drop", (event) => {
    composer.classList.remove("dropping");
    if (!carriesFiles(event)) return;
    event.preventDefault();
    addAll(Array.from(event.dataTransfer.files));
  });
}

function count() {
  return pending.length;
}

hooks.register("attachments", { mount, collect, clear, show, count });
