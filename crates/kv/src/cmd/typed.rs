//! [`typed`] and [`typed_mut`]: the collection a key holds, found or
//! made, with WRONGTYPE for a key of another type.

use crate::resp::Reply;
use crate::store::Store;
use crate::value::{wrongtype, Value, ZSet};
use imbl::{OrdMap, OrdSet, Vector};

/// A collection type a key can hold, as it sits in a [`Value`]: what
/// [`typed`] and [`typed_mut`] need to find it or make it.
pub(crate) trait Typed: Default {
    fn of(v: &Value) -> Option<&Self>;
    fn of_mut(v: &mut Value) -> Option<&mut Self>;
    fn wrap(self) -> Value;
}

macro_rules! typed {
    ($t:ty, $variant:ident) => {
        impl Typed for $t {
            fn of(v: &Value) -> Option<&Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn of_mut(v: &mut Value) -> Option<&mut Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn wrap(self) -> Value {
                Value::$variant(self)
            }
        }
    };
}

typed!(OrdMap<Vec<u8>, Vec<u8>>, Hash);
typed!(Vector<Vec<u8>>, List);
typed!(OrdSet<Vec<u8>>, Set);
typed!(ZSet, ZSet);

/// The `T` a key holds: `None` for no key, WRONGTYPE for another type.
pub(crate) fn typed<T: Typed>(v: Option<&Value>) -> Result<Option<&T>, Reply> {
    match v {
        None => Ok(None),
        Some(v) => T::of(v).map(Some).ok_or_else(wrongtype),
    }
}

/// The `T` at `key` to change, created empty first when absent and
/// `create`; `None` for no key, WRONGTYPE for another type.
pub(crate) fn typed_mut<'a, T: Typed>(
    st: &'a mut Store,
    key: &[u8],
    create: bool,
) -> Result<Option<&'a mut T>, Reply> {
    match st.cur(key) {
        None if create => st.put_value(key, T::default().wrap(), None),
        None => return Ok(None),
        Some(v) if T::of(v).is_none() => return Err(wrongtype()),
        Some(_) => {}
    }
    st.cur_mut(key)
        .and_then(T::of_mut)
        .map(Some)
        .ok_or_else(wrongtype)
}
