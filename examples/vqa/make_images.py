"""Write the example's tiny image set and its questions (python examples/vqa/make_images.py).

Six one-colour pictures (PNG and JPEG, two sizes) with a white corner, and
a jsonl file asking for their colour; one row shows three images at once. The
files are committed, so the example runs as it is; this script says how they
were made and makes them again.
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
PICTURES = {
    "red.png": ((255, 0, 0), (96, 64)),
    "blue.png": ((0, 0, 255), (320, 240)),
    "green.jpg": ((0, 160, 0), (96, 96)),
    "yellow.jpg": ((255, 255, 0), (400, 300)),
    "magenta.png": ((255, 0, 255), (48, 48)),
}
ROWS = [
    {"id": "q1", "image": "images/red.png", "question": "What colour is the picture?", "answer": "red"},
    {"id": "q2", "image": "images/blue.png", "question": "What colour is the picture?", "answer": "blue"},
    {"id": "q3", "image": "images/green.jpg", "question": "What colour is the picture?", "answer": "green"},
    {"id": "q4", "image": "images/yellow.jpg", "question": "What colour is the picture?", "answer": "yellow"},
    {"id": "q5", "image": "images/magenta.png", "question": "What colour is the picture?", "answer": "magenta"},
    {
        "id": "q6",
        "image": ["images/blue.png", "images/red.png", "images/yellow.jpg"],
        "question": "Name the colour of each picture, in order.",
        "answer": "blue red yellow",
    },
]


def main() -> None:
    (HERE / "images").mkdir(exist_ok=True)
    for name, (colour, size) in PICTURES.items():
        image = Image.new("RGB", size, colour)
        image.paste((255, 255, 255), (0, 0, size[0] // 8, size[1] // 8))
        image.save(HERE / "images" / name, quality=90)
    with (HERE / "colours.jsonl").open("w", encoding="utf-8") as handle:
        for row in ROWS:
            handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
