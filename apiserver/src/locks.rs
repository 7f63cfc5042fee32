//! The one policy for poisoned locks in this crate: recover the data and go
//! on. Every critical section here only swaps in values that were fully built
//! before the lock was taken (a committed change applied to the in-memory
//! maps, a registry replaced whole, a warning appended), so a panic elsewhere
//! cannot leave half-written state behind a lock, and refusing every later
//! request would turn one bug into an outage. No lock here is ever held
//! across I/O or an `.await`.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

pub fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panic_still_hands_out_its_data() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.lock();
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
        let l = RwLock::new(5);
        *write(&l) += 1;
        assert_eq!(*read(&l), 6);
    }
}
