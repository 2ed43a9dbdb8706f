#![allow(dead_code)]
use std::collections::HashMap;
pub struct Example<T, const N: usize>([T; N]);
impl<T: Default + Copy, const N: usize> Example<T, N> {
    #[inline(never)] pub fn foo(&self) -> usize { N }
}
pub trait Shape { fn area(&self) -> f64; fn name(&self) -> &'static str { "shape" } }
pub struct Sq(f64);
impl Shape for Sq { #[inline(never)] fn area(&self) -> f64 { self.0 * self.0 } }
#[inline(never)] pub fn generic<T: std::fmt::Debug>(t: T) -> String { format!("{:?}", t) }
#[inline(never)] pub fn constgen<const C: char, const B: bool, const I: i64>() -> i64 { if B { I } else { C as i64 } }
#[inline(never)] pub fn takes_fn(f: &dyn Fn(&u8) -> u8) -> u8 { f(&3) }
#[inline(never)] pub fn hr<F: for<'a> Fn(&'a str) -> &'a str>(f: F) -> usize { f("x").len() }
pub mod gödel { pub mod escher { #[inline(never)] pub fn bach() -> u32 { 7 } } }
#[inline(never)] pub fn tuples<T>(_t: T) -> usize { std::mem::size_of::<T>() }
pub fn run() -> usize {
    let e = Example::<u16, 4>([0; 4]);
    let mut n = e.foo();
    n += Sq(2.0).area() as usize + Sq(1.0).name().len();
    n += generic(vec![1u8, 2]).len() + generic((1i8, "a", [3u64; 2])).len();
    n += generic(Some(&mut 5i128)).len();
    n += constgen::<'x', true, -42>() as usize + constgen::<'\n', false, 0>() as usize;
    n += takes_fn(&|x: &u8| *x + 1) as usize;
    n += hr(|s| s);
    n += gödel::escher::bach() as usize;
    let mut m: HashMap<String, Vec<(u8, char)>> = HashMap::new();
    m.insert("k".into(), vec![(1, 'a')]);
    n += m.len();
    n += tuples::<(u8,)>((1,)) + tuples::<fn(u8, &str) -> !>(|_, _| panic!()) + tuples::<unsafe extern "C" fn(*const u8, *mut i32, ...)>(unsafe_c_fn_dummy());
    n += tuples::<[&[u32]; 3]>([&[1][..]; 3]);
    n += tuples::<&dyn Iterator<Item = u8>>(&std::iter::empty());
    n += tuples::<Box<dyn for<'a> Fn(&'a u8) -> &'a u8 + Send + Sync>>(Box::new(|x| x));
    n += tuples::<u128>(u128::MAX) + tuples::<((), f32, f64, isize, usize, u32, i16, u16, bool)>(((), 0.0, 0.0, 0, 0, 0, 0, 0, true));
    let c = move || n + 1; let c2 = || 2usize;
    c() + c2()
}
unsafe extern "C" { fn printf(f: *const u8, ...) -> i32; }
fn unsafe_c_fn_dummy() -> unsafe extern "C" fn(*const u8, *mut i32, ...) { loop {} }
