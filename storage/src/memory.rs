//! The memory backend: records and history in process memory. It defines the reference
//! semantics (through the shared engine in `local.rs`) and is the test double; nothing survives
//! the process.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::engine::LocalOptions;
use crate::error::Result;
use crate::local::{Backend, Change, Local, Record, Recovered};
use crate::{Store, WatchEvent};

#[derive(Default)]
struct State {
    records: BTreeMap<String, Record>,
    /// The kept events, oldest first, by revision: `history[i]` holds the events (one per key
    /// its commit wrote) of revision `first + i`.
    history: VecDeque<Vec<Arc<WatchEvent>>>,
    /// The revision of `history[0]`.
    first: u64,
}

struct Memory {
    state: Mutex<State>,
}

pub(crate) fn open(options: LocalOptions) -> Arc<dyn Store> {
    let memory = Memory { state: Mutex::new(State { first: 1, ..State::default() }) };
    Local::start(memory, Recovered::default(), options)
}

impl Memory {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Backend for Memory {
    const SYNCS: bool = false;

    fn get(&self, key: &str) -> Result<Option<Record>> {
        Ok(self.state().records.get(key).cloned())
    }

    fn scan(&self, start: &str, end: &str, limit: usize) -> Result<Vec<(String, Record)>> {
        let state = self.state();
        let range = state
            .records
            .range::<str, _>((std::ops::Bound::Included(start), std::ops::Bound::Excluded(end)));
        Ok(range.take(limit).map(|(k, r)| (k.clone(), r.clone())).collect())
    }

    fn count(&self, start: &str, end: &str) -> Result<u64> {
        let state = self.state();
        let range = state
            .records
            .range::<str, _>((std::ops::Bound::Included(start), std::ops::Bound::Excluded(end)));
        Ok(range.count() as u64)
    }

    fn history(&self, from: u64, to: u64) -> Result<Vec<Arc<WatchEvent>>> {
        let state = self.state();
        let skip = from.saturating_sub(state.first) as usize;
        let take = (to + 1).saturating_sub(from.max(state.first)) as usize;
        Ok(state.history.iter().skip(skip).take(take).flatten().cloned().collect())
    }

    fn apply(&self, changes: &[Change<'_>]) -> Result<()> {
        let mut state = self.state();
        for change in changes {
            let key = &change.event.key;
            match change.record {
                Some(record) => state.records.insert(key.clone(), record.clone()),
                None => state.records.remove(key),
            };
            let revision = change.event.revision.0;
            // A commit's changes are adjacent: the first of a revision opens its entry.
            let newest = state.first + state.history.len() as u64;
            match state.history.back_mut() {
                Some(events) if newest == revision + 1 => events.push(Arc::clone(change.event)),
                _ => state.history.push_back(vec![Arc::clone(change.event)]),
            }
        }
        Ok(())
    }

    fn compact(&self, _from: u64, to: u64) -> Result<()> {
        let mut state = self.state();
        while state.first <= to && state.history.pop_front().is_some() {
            state.first += 1;
        }
        state.first = state.first.max(to + 1);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn import(&self, records: &[(String, Record)]) -> Result<()> {
        let mut state = self.state();
        for (key, record) in records {
            state.records.insert(key.clone(), record.clone());
        }
        Ok(())
    }

    fn finish_import(&self, at: u64) -> Result<()> {
        self.compact(0, at)
    }
}
