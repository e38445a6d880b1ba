"""Attachments on the page (SPEC §11) in headless Chromium, signed in with a key bound to user
`ada`: a PNG attached from the Attach button's file chooser (opened with the keyboard), an
image pasted into the message box and removed again with the keyboard, a text file dropped on
the composer, a file the server refuses (415, its reason shown, nothing left pending); the
message sent with its files shows the image as a thumbnail and the text file as a chip, and
so does the conversation when the page is reloaded and when it is reopened from the sidebar
(the image fetched through the Files API with the key). axe finds no violation with files
pending and with them sent. Prints `png BASE64` (the PNG the page attached, for the Rust test
to find at the upstream) and one `NAME ok` line per step; any failure raises.

Usage: attachments.py BASE_URL KEY SCREENSHOT_DIR
"""
import base64
import os
import struct
import sys
import zlib

from playwright.sync_api import expect, sync_playwright

from pagekit import axe, launch, open_page, TIMEOUT

BASE, KEY, SHOTS = sys.argv[1:4]
NOTES = "Meeting notes: the square is red.\n"


def png(width, height, rgb):
    """A solid-colour RGB PNG, built by hand (no imaging package needed)."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    row = b"\x00" + bytes(rgb) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b""))


def shown_images(locator):
    """The decoded width of each image in `locator` (0: not shown)."""
    return locator.evaluate_all("imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")


def expect_thumbnail(page, scope, name, width):
    image = page.locator(f"{scope} img.thumb[alt='{name}']")
    expect(image).to_have_count(1, timeout=TIMEOUT)
    page.wait_for_function(
        "([sel, w]) => { const i = document.querySelector(sel); return i && i.complete && i.naturalWidth === w; }",
        arg=[f"{scope} img.thumb[alt='{name}']", width],
        timeout=TIMEOUT,
    )


def file_events(page, kind, target, files):
    """Dispatches a paste (on `target`) or drop event carrying `files` [(name, type, base64)]."""
    page.evaluate(
        """([kind, target, files]) => {
            const data = new DataTransfer();
            for (const [name, type, b64] of files) {
                const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
                data.items.add(new File([bytes], name, { type }));
            }
            const node = document.querySelector(target);
            if (kind === "paste") {
                node.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
            } else {
                node.dispatchEvent(new DragEvent("dragover", { dataTransfer: data, bubbles: true, cancelable: true }));
                node.dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }));
            }
        }""",
        [kind, target, files],
    )


def check_sent_message(page, where):
    bubble = page.locator(".message.user").first
    expect(bubble.locator(".message-files")).to_be_visible(timeout=TIMEOUT)
    expect_thumbnail(page, ".message.user .message-files", "red.png", 24)
    chip = bubble.locator(".message-file .file-chip")
    expect(chip).to_have_count(1)
    expect(chip.locator(".file-name")).to_have_text("notes.txt")
    expect(chip.locator(".file-size")).to_have_text(f"{len(NOTES)} B")
    expect(bubble.locator(".text")).to_have_text("What is in the picture?")
    print(f"{where} ok")


def main():
    red = png(24, 24, (220, 30, 30))
    blue = png(12, 12, (30, 30, 220))
    print("png " + base64.b64encode(red).decode())
    with sync_playwright() as p:
        browser = launch(p)
        page, errors = open_page(browser)
        page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
        page.goto(BASE + "/")
        expect(page.locator("#notice")).to_contain_text("401", timeout=TIMEOUT)
        if not page.locator("#key").is_visible():
            page.click("#identity summary")
        page.fill("#key", KEY)
        page.click("#connect")
        expect(page.locator("#agent option[value=chat]")).to_have_count(1, timeout=TIMEOUT)
        errors.clear()  # the first, keyless request is the browser's own console line

        # The Attach button, reached and pressed with the keyboard, opens the file chooser.
        attach = page.locator("#attach")
        expect(attach).to_have_accessible_name("Attach files")
        page.focus("#prompt")
        page.keyboard.press("Shift+Tab")
        expect(attach).to_be_focused()
        with page.expect_file_chooser() as chooser:
            attach.press("Enter")
        chooser.value.set_files(files=[{"name": "red.png", "mimeType": "image/png", "buffer": red}])
        pending = page.locator("#pending-files .attachment")
        expect(pending).to_have_count(1, timeout=TIMEOUT)
        expect_thumbnail(page, "#pending-files", "red.png", 24)
        expect(pending.first).not_to_have_attribute("aria-busy", "true", timeout=TIMEOUT)
        expect(pending.first.locator(".file-size")).to_have_text(f"{len(red)} B")
        print("attach ok")

        # An image pasted into the message box, then removed with the keyboard.
        file_events(page, "paste", "#prompt", [["image.png", "image/png", base64.b64encode(blue).decode()]])
        expect(pending).to_have_count(2, timeout=TIMEOUT)
        expect_thumbnail(page, "#pending-files", "image.png", 12)
        remove = page.get_by_role("button", name="Remove image.png")
        remove.focus()
        page.keyboard.press("Enter")
        expect(pending).to_have_count(1)
        expect(page.locator("#pending-files img.thumb[alt='image.png']")).to_have_count(0)
        print("paste ok")

        # A text file dropped on the composer.
        file_events(page, "drop", "#composer", [["notes.txt", "text/plain", base64.b64encode(NOTES.encode()).decode()]])
        expect(pending).to_have_count(2, timeout=TIMEOUT)
        expect(pending.last.locator(".file-name")).to_have_text("notes.txt")
        expect(pending.last).not_to_have_attribute("aria-busy", "true", timeout=TIMEOUT)
        print("drop ok")

        # A file the server refuses: its reason in words, and it is not left pending.
        with page.expect_file_chooser() as chooser:
            attach.click()
        chooser.value.set_files(files=[{"name": "blob.bin", "mimeType": "application/octet-stream", "buffer": bytes([0, 255, 0, 254] * 64)}])
        notice = page.locator("#notice")
        expect(notice).to_contain_text("blob.bin was not attached (415)", timeout=TIMEOUT)
        expect(notice).to_contain_text("application/octet-stream")
        expect(pending).to_have_count(2)
        errors[:] = [e for e in errors if "415" not in e]
        print("refused ok")
        page.screenshot(path=os.path.join(SHOTS, "attachments-pending.png"))
        axe(page, "pending files")

        page.fill("#prompt", "What is in the picture?")
        page.focus("#prompt")
        page.keyboard.press("Enter")
        expect(page.locator(".message.assistant").last).to_contain_text("A red square.", timeout=TIMEOUT)
        expect(page.locator("#attachments-slot")).to_be_hidden()
        check_sent_message(page, "sent")
        page.screenshot(path=os.path.join(SHOTS, "attachments-sent.png"))
        axe(page, "sent files")

        # Reloaded: the conversation comes back from the store, its image through the Files API.
        page.reload()
        expect(page.locator(".message.assistant").last).to_contain_text("A red square.", timeout=TIMEOUT)
        check_sent_message(page, "reload")
        src = page.locator(".message.user img.thumb").first.get_attribute("src")
        assert src.startswith("blob:"), src

        # Reopened from the sidebar after a new chat.
        page.click("#new-chat")
        expect(page.locator(".message")).to_have_count(0)
        page.locator(".conversation .open").first.click()
        check_sent_message(page, "reopen")
        page.screenshot(path=os.path.join(SHOTS, "attachments-reopened.png"))

        assert not errors, errors
        browser.close()


if __name__ == "__main__":
    main()
