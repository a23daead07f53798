use std::fmt;

/// A point.
#[derive(Debug, Clone)]
pub struct S {
    a: u8,
}

impl S {
    pub fn new() -> S {
        S { a: 0 }
    }
}

impl From<u8> for S {
    fn from(x: u8) -> S {
        S { a: x }
    }
}

impl From<u16> for S {
    fn from(x: u16) -> S {
        S { a: x as u8 }
    }
}

impl fmt::Display for Other {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        Ok(())
    }
}

pub trait Shape {
    fn area(&self) -> f64;
    fn name(&self) -> &str {
        "shape"
    }
}

pub enum E {
    A,
    B(u8),
}

macro_rules! square {
    ($x:expr) => {
        $x * $x
    };
}

mod tests {
    #[test]
    fn adds() {
        assert_eq!(2, 1 + 1);
    }

    #[test]
    #[ignore]
    fn slow() {}
}
