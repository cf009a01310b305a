//! PNG text rendering: a bitmap backend that lays text out with the embedded
//! DejaVu Sans.

use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord, BackendTextStyle, DrawingErrorKind};

use ab_glyph::{Font, FontRef, PxScale, ScaleFont};

// PNG text rendering
//
// plotters' own ab_glyph text path drops each glyph's left bearing and
// truncates positions per glyph, which gives uneven letter spacing and
// raised decimal points. The PNG backend below delegates all drawing to
// `BitMapBackend` except text, which it lays out on a common baseline with
// sub-pixel pen positions and kerning.

/// Regular and bold DejaVu Sans, parsed once.
fn glyph_fonts() -> Option<&'static (FontRef<'static>, FontRef<'static>)> {
    static FONTS: OnceLock<Option<(FontRef<'static>, FontRef<'static>)>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let regular = FontRef::try_from_slice(dejavu::sans::regular()).ok()?;
            let bold = FontRef::try_from_slice(dejavu::sans::bold()).ok()?;
            Some((regular, bold))
        })
        .as_ref()
}

/// Glyphs of `text` positioned on a baseline at y = ascent, x from 0.
struct TextLayout {
    glyphs: Vec<ab_glyph::Glyph>,
    width: f32,
    height: f32,
}

fn layout_text(font: &FontRef<'static>, size: f32, text: &str) -> TextLayout {
    let scale = PxScale::from(size.max(1.0));
    let sf = font.as_scaled(scale);
    let ascent = sf.ascent();
    let mut x = 0f32;
    let mut prev = None;
    let mut glyphs = Vec::with_capacity(text.len());
    for c in text.chars() {
        let id = sf.glyph_id(c);
        if let Some(p) = prev {
            x += sf.kern(p, id);
        }
        glyphs.push(id.with_scale_and_position(scale, ab_glyph::point(x, ascent)));
        x += sf.h_advance(id);
        prev = Some(id);
    }
    TextLayout {
        glyphs,
        width: x,
        height: ascent - sf.descent(),
    }
}

fn font_for<S: BackendTextStyle>(style: &S) -> Option<&'static FontRef<'static>> {
    let (regular, bold) = glyph_fonts()?;
    Some(match style.style() {
        plotters_backend::FontStyle::Bold => bold,
        _ => regular,
    })
}

/// `BitMapBackend` with better text rendering.
pub(super) struct PngBackend<'a> {
    pub(super) inner: BitMapBackend<'a>,
}

impl DrawingBackend for PngBackend<'_> {
    type ErrorType = <BitMapBackend<'static> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        (iw, ih): (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.blit_bitmap(pos, (iw, ih), src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let Some(font) = font_for(style) else {
            return self.inner.estimate_text_size(text, style);
        };
        let l = layout_text(font, style.size() as f32, text);
        Ok((l.width.ceil() as u32, l.height.ceil() as u32))
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let Some(font) = font_for(style) else {
            return self.inner.draw_text(text, style, pos);
        };
        let l = layout_text(font, style.size() as f32, text);
        let (w, h) = (l.width.round() as i32, l.height.round() as i32);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -w,
            HPos::Center => -w / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -h / 2,
            VPos::Bottom => -h,
        };
        let trans = style.transform();
        let (bw, bh) = self.get_size();
        let mut pixels = Vec::new();
        for g in l.glyphs {
            if let Some(outline) = font.outline_glyph(g) {
                let b = outline.px_bounds();
                let (ox, oy) = (b.min.x as i32, b.min.y as i32);
                outline.draw(|x, y, cov| {
                    if cov > 0.0 {
                        pixels.push((ox + x as i32, oy + y as i32, cov));
                    }
                });
            }
        }
        for (x, y, cov) in pixels {
            let (x, y) = trans.transform(x + dx, y + dy);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && y >= 0 && x < bw as i32 && y < bh as i32 {
                let c = BackendColor {
                    alpha: color.alpha * f64::from(cov.min(1.0)),
                    rgb: color.rgb,
                };
                self.inner.draw_pixel((x, y), c)?;
            }
        }
        Ok(())
    }
}
