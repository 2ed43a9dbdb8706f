// Const generics of str, reference, array, tuple and struct/enum values (adt_const_params):
// the unstable const forms of the v0 grammar, for tests/tools/rust_demangle_compare.py.
#![allow(dead_code, incomplete_features)]
#![feature(adt_const_params, unsized_const_params)]
use std::marker::ConstParamTy;
#[derive(PartialEq, Eq, ConstParamTy)] pub struct Point { x: i32, y: u8 }
#[derive(PartialEq, Eq, ConstParamTy)] pub struct Pair(u8, bool);
#[derive(PartialEq, Eq, ConstParamTy)] pub enum Mode { Off, Level(u8), Named { n: char } }
#[inline(never)] pub fn s<const S: &'static str>() -> usize { S.len() }
#[inline(never)] pub fn p<const P: Point>() -> i32 { P.x }
#[inline(never)] pub fn q<const Q: Pair>() -> u8 { Q.0 }
#[inline(never)] pub fn m<const M: Mode>() -> usize { 1 }
#[inline(never)] pub fn a<const A: [u8; 3]>() -> u8 { A[0] }
#[inline(never)] pub fn t<const T: (u8, bool)>() -> u8 { T.0 }
#[inline(never)] pub fn t1<const T: (char,)>() -> usize { 1 }
#[inline(never)] pub fn r<const R: &'static [u16]>() -> usize { R.len() }
#[inline(never)] pub fn rr<const R: &'static &'static str>() -> usize { R.len() }
pub fn run() -> usize {
    s::<"hi \"you\" 'x' \n ü ∂ \u{1F600}">() + s::<"">() + p::<{ Point { x: -3, y: 7 } }>() as usize
        + q::<{ Pair(4, true) }>() as usize + m::<{ Mode::Off }>() + m::<{ Mode::Level(2) }>()
        + m::<{ Mode::Named { n: 'z' } }>() + a::<{ [1, 2, 3] }>() as usize + t::<{ (5, false) }>() as usize
        + t1::<{ ('q',) }>() + r::<{ &[1, 2] }>() + rr::<{ &"ab" }>()
}
