"""Write the two sample PDFs in data/ (run once; the PDFs are committed, so the example never needs this).

Run:  python examples/rag_cli/make_sample_pdfs.py
Japanese text uses reportlab's built-in CID font HeiseiKakuGo-W5 (not embedded: the files stay small).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from reportlab.lib.pagesizes import A4
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfgen import canvas

DATA = Path(__file__).resolve().parent / "data"

MANUAL = [  # Aurora X2 coffee maker, one string per page; paragraphs separated by blank lines
    """Aurora X2 Coffee Maker - User Manual

1. Safety and set-up. Place the Aurora X2 on a flat, dry surface at least 10 cm from the wall. The machine
draws 1200 W; plug it into a grounded outlet of its own and never use an extension cord.

The water tank holds 1.8 liters (about 12 cups). Fill it with cold, fresh water only, up to the MAX line.
Rinse the glass carafe and the permanent filter before the first use.""",
    """2. Brewing. Put one level scoop (7 g) of ground coffee per cup into the filter. Choose the strength with
the BOLD button: Mild, Regular or Bold. Press START; brewing 12 cups takes about 10 minutes.

The keep-warm plate stays on after brewing and switches off automatically after 40 minutes (auto shut-off).
To brew later, set the timer: hold PROG for 2 seconds, set the start time with H and M, then press PROG.""",
    """3. Cleaning and descaling. Wash the carafe and the filter after each use. Descale the machine every
3 months (every month with hard water): dissolve 30 g of citric acid in 1 liter of water, run a brew cycle
without coffee, then run two cycles with clean water.

4. Error codes. E1: the water tank is empty - fill it and press START. E4: the heater is overheating -
unplug the machine and let it cool for 30 minutes. E7: the lid is open - close it firmly.""",
]

WARRANTY_JA = [  # 保証規定 (warranty terms), two pages
    """オーロラ X2 保証規定

保証期間はお買い上げ日から2年間です。保証期間内に取扱説明書に従った正常な使用で故障した場合は、
無料で修理いたします。修理の際は保証書と購入時のレシートが必要です。

次の場合は保証期間内でも有料修理となります。落下などによる破損、水以外の液体の使用、
業務用としての使用、当社以外での改造や分解。""",
    """修理のご依頼方法

修理はオーロラ サポートセンターで受け付けています。電話番号は 0120-123-456、
受付時間は平日の午前9時から午後6時までです（土日祝日を除く）。

保証期間内の修理では往復の送料を当社が負担します。修理期間は通常、製品到着から7日程度です。
交換部品の保有期間は製造終了後5年間です。""",
]


def write_pdf(path: Path, pages: list[str], font: str, size: int, width: int, title: str) -> None:
    """One page per string: paragraphs wrapped at ``width`` characters, drawn top-down."""
    c = canvas.Canvas(str(path), pagesize=A4, pageCompression=1)
    c.setTitle(title)
    for page in pages:
        y: float = 780
        c.setFont(font, size)
        for paragraph in page.split("\n\n"):
            joined = (
                " ".join(paragraph.split("\n")) if font == "Helvetica" else "".join(paragraph.split("\n"))
            )
            sentences = (
                [joined] if font == "Helvetica" else re.findall(r"[^。]+。?", joined)
            )  # a line per sentence
            lines = [line for s in sentences for line in textwrap.wrap(s, width, break_on_hyphens=False)]
            for line in lines:
                c.drawString(60, y, line)
                y -= size * 1.6
            y -= size
        c.showPage()
    c.save()


def main() -> None:
    pdfmetrics.registerFont(UnicodeCIDFont("HeiseiKakuGo-W5"))
    write_pdf(DATA / "aurora_manual.pdf", MANUAL, "Helvetica", 11, 90, "Aurora X2 User Manual")
    write_pdf(DATA / "warranty_ja.pdf", WARRANTY_JA, "HeiseiKakuGo-W5", 10, 46, "オーロラ X2 保証規定")
    for name in ("aurora_manual.pdf", "warranty_ja.pdf"):
        print(name, (DATA / name).stat().st_size, "bytes")


if __name__ == "__main__":
    main()
