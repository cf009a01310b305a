//! The steering program, assembled here instruction by instruction.
//!
//! It is 45 instructions; building it from C or Rust would make an eBPF
//! toolchain (clang, or a nightly compiler with `bpf-linker`) a build
//! requirement for every user of the lane, and neither aya nor libbpf-rs
//! loads anything but such an object file. The kernel's verifier checks
//! the program at every load, and the tests run it on real frames.
//!
//! What it does with a frame on the interface:
//!
//! 1. Ethernet II, IPv4 with a 20-byte header, not a fragment, UDP, the
//!    lane's DSCP, and a destination port in the ports map (the ports the
//!    lane's receivers on this interface listen on): a lane frame. Anything
//!    else returns `XDP_PASS`, to the regular stack, untouched.
//! 2. A lane frame gets the time (`bpf_ktime_get_ns`, `CLOCK_MONOTONIC`)
//!    in 8 bytes of metadata in front of it, when the driver offers
//!    metadata room; otherwise the metadata stays zero.
//! 3. It is redirected to the AF_XDP socket of its receive queue in the
//!    `XSKMAP`; with no socket there, it is passed to the stack.

/// One eBPF instruction, as the kernel reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    /// Opcode.
    pub code: u8,
    /// Destination register (low nibble) and source register (high nibble).
    pub regs: u8,
    /// Offset (memory access, jumps).
    pub off: i16,
    /// Immediate.
    pub imm: i32,
}

/// `XDP_PASS`.
pub const XDP_PASS: i32 = 2;

// Registers.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R6: u8 = 6;
const R10: u8 = 10;

// Helpers.
const MAP_LOOKUP_ELEM: i32 = 1;
const KTIME_GET_NS: i32 = 5;
const REDIRECT_MAP: i32 = 51;
const XDP_ADJUST_META: i32 = 54;

// Offsets in `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_DATA_META: i16 = 8;
const MD_RX_QUEUE: i16 = 16;

/// Where a jump goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Label {
    Pass,
    Redirect,
}

/// A tiny assembler: instructions, with jumps to labels resolved at the end.
#[derive(Default)]
struct Asm {
    insns: Vec<Insn>,
    jumps: Vec<(usize, Label)>,
    labels: Vec<(Label, usize)>,
}

impl Asm {
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(Insn {
            code,
            regs: (src << 4) | dst,
            off,
            imm,
        });
    }
    /// `dst = *(size *)(src + off)`; size code: W 0x61, H 0x69, B 0x71.
    fn ldx(&mut self, code: u8, dst: u8, src: u8, off: i16) {
        self.op(code, dst, src, off, 0);
    }
    fn mov_imm(&mut self, dst: u8, imm: i32) {
        self.op(0xb7, dst, 0, 0, imm);
    }
    fn mov(&mut self, dst: u8, src: u8) {
        self.op(0xbf, dst, src, 0, 0);
    }
    fn add_imm(&mut self, dst: u8, imm: i32) {
        self.op(0x07, dst, 0, 0, imm);
    }
    fn and_imm(&mut self, dst: u8, imm: i32) {
        self.op(0x57, dst, 0, 0, imm);
    }
    /// `if dst != imm goto to`.
    fn jne_imm(&mut self, dst: u8, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.op(0x55, dst, 0, 0, imm);
    }
    /// `if dst > src goto to` (unsigned).
    fn jgt(&mut self, dst: u8, src: u8, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.op(0x2d, dst, src, 0, 0);
    }
    fn call(&mut self, helper: i32) {
        self.op(0x85, 0, 0, 0, helper);
    }
    fn exit(&mut self) {
        self.op(0x95, 0, 0, 0, 0);
    }
    /// `*(u64 *)(dst + off) = src`.
    fn stx_dw(&mut self, dst: u8, src: u8, off: i16) {
        self.op(0x7b, dst, src, off, 0);
    }
    /// `*(u32 *)(dst + off) = src`.
    fn stx_w(&mut self, dst: u8, src: u8, off: i16) {
        self.op(0x63, dst, src, off, 0);
    }
    /// `if dst == imm goto to`.
    fn jeq_imm(&mut self, dst: u8, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.op(0x15, dst, 0, 0, imm);
    }
    /// `dst = map` (a 64-bit load of a map descriptor).
    fn ld_map_fd(&mut self, dst: u8, fd: i32) {
        self.op(0x18, dst, 1, 0, fd);
        self.op(0, 0, 0, 0, 0);
    }
    fn label(&mut self, l: Label) {
        self.labels.push((l, self.insns.len()));
    }
    fn finish(mut self) -> Vec<Insn> {
        for (at, to) in &self.jumps {
            let target = self
                .labels
                .iter()
                .find(|(l, _)| l == to)
                .map(|&(_, i)| i)
                .expect("every label used is placed");
            self.insns[*at].off = (target as i64 - *at as i64 - 1) as i16;
        }
        self.insns
    }
}

/// The key of `port` in the ports map: the port's two bytes as they stand
/// in the frame, read as a little-endian number (what the program loads).
pub fn port_key(port: u16) -> u32 {
    u32::from(u16::from_le_bytes(port.to_be_bytes()))
}

/// The steering program for lane frames marked `dscp` to a UDP port in the
/// hash map `ports` (keys [`port_key`]), redirecting through the `XSKMAP`
/// with descriptor `xskmap`.
pub fn steering(dscp: u8, ports: i32, xskmap: i32) -> Vec<Insn> {
    let mut a = Asm::default();
    a.mov(R6, R1);
    a.ldx(0x61, R2, R6, MD_DATA);
    a.ldx(0x61, R3, R6, MD_DATA_END);
    // The three headers up to the destination port must be in the frame.
    a.mov(R4, R2);
    a.add_imm(R4, 38);
    a.jgt(R4, R3, Label::Pass);
    // Loads are little-endian: a big-endian 16-bit field reads byte-swapped.
    a.ldx(0x69, R4, R2, 12);
    a.jne_imm(R4, i32::from(0x0800u16.swap_bytes()), Label::Pass);
    a.ldx(0x71, R4, R2, 14);
    a.jne_imm(R4, 0x45, Label::Pass);
    a.ldx(0x71, R4, R2, 15);
    a.and_imm(R4, 0xfc);
    a.jne_imm(R4, i32::from(dscp) << 2, Label::Pass);
    a.ldx(0x71, R4, R2, 23);
    a.jne_imm(R4, 17, Label::Pass);
    // Flags and fragment offset: more-fragments or an offset is a fragment.
    a.ldx(0x69, R4, R2, 20);
    a.and_imm(R4, i32::from(0x3fffu16.swap_bytes()));
    a.jne_imm(R4, 0, Label::Pass);
    // The destination port: a lane port if the ports map has it.
    a.ldx(0x69, R4, R2, 36);
    a.stx_w(R10, R4, -4);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.ld_map_fd(R1, ports);
    a.call(MAP_LOOKUP_ELEM);
    a.jeq_imm(R0, 0, Label::Pass);
    // A lane frame: the arrival time into 8 bytes of metadata, if there is room.
    a.mov(R1, R6);
    a.mov_imm(R2, -8);
    a.call(XDP_ADJUST_META);
    a.jne_imm(R0, 0, Label::Redirect);
    a.call(KTIME_GET_NS);
    a.ldx(0x61, R2, R6, MD_DATA_META);
    a.ldx(0x61, R3, R6, MD_DATA);
    a.mov(R4, R2);
    a.add_imm(R4, 8);
    a.jgt(R4, R3, Label::Redirect);
    a.stx_dw(R2, R0, 0);
    a.label(Label::Redirect);
    a.ldx(0x61, R2, R6, MD_RX_QUEUE);
    a.ld_map_fd(R1, xskmap);
    // No socket at this queue: the flags' low bits are the action instead.
    a.mov_imm(R3, XDP_PASS);
    a.call(REDIRECT_MAP);
    a.exit();
    a.label(Label::Pass);
    a.mov_imm(R0, XDP_PASS);
    a.exit();
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_land_on_their_labels() {
        let p = steering(46, 8, 9);
        let n = p.len() as i64;
        let pass = n - 2;
        for (i, x) in p.iter().enumerate() {
            if x.code == 0x55 || x.code == 0x2d || x.code == 0x15 {
                let to = i as i64 + 1 + i64::from(x.off);
                assert!(to > i as i64 && to < n, "jump at {i} leaves the program");
                assert!(
                    to == pass || p[to as usize].code == 0x61,
                    "jump at {i} lands on neither label"
                );
            }
        }
        assert_eq!(p[pass as usize].imm, XDP_PASS);
        assert_eq!(p.len(), 45, "the length the module docs give");
        assert_eq!(p.last().unwrap().code, 0x95);
    }

    #[test]
    fn matches_carry_the_configured_values() {
        let p = steering(46, 8, 9);
        let imms: Vec<i32> = p.iter().filter(|x| x.code == 0x55).map(|x| x.imm).collect();
        // EtherType, IHL, DSCP, UDP, fragments, then the metadata check.
        assert_eq!(imms, vec![0x0008, 0x45, 46 << 2, 17, 0, 0]);
        let maps: Vec<(i32, u8)> = p
            .iter()
            .filter(|x| x.code == 0x18)
            .map(|x| (x.imm, x.regs >> 4))
            .collect();
        assert_eq!(maps, vec![(8, 1), (9, 1)], "ports map, then XSKMAP");
        assert_eq!(port_key(7200).to_le_bytes()[..2], 7200u16.to_be_bytes());
    }
}
