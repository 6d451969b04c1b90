//! Per-cycle state: what PreFilter and PreScore computed for one pod, read by
//! Filter and Score on every node. Cloned for preemption's dry runs, which
//! add and remove pods through the PreFilter extensions.

use std::any::Any;

/// Data one plugin keeps for the cycle.
pub trait StateData: Any + Send + Sync {
    fn clone_data(&self) -> Box<dyn StateData>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + Send + Sync> StateData for T {
    fn clone_data(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A few plugin names (a list: cheaper than hashing for so few).
#[derive(Debug, Clone, Default)]
pub struct SkipSet(Vec<&'static str>);

impl SkipSet {
    pub fn insert(&mut self, name: &'static str) {
        if !self.contains(name) {
            self.0.push(name);
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.contains(&name)
    }
}

#[derive(Default)]
pub struct CycleState {
    entries: Vec<(&'static str, Box<dyn StateData>)>,
    /// Plugins whose PreFilter said Skip: their Filter is not run.
    pub skip_filter: SkipSet,
    /// Plugins whose PreScore said Skip: their Score is not run.
    pub skip_score: SkipSet,
}

impl CycleState {
    pub fn new() -> CycleState {
        CycleState::default()
    }

    pub fn write<T: StateData>(&mut self, key: &'static str, value: T) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = Box::new(value),
            None => self.entries.push((key, Box::new(value))),
        }
    }

    pub fn read<T: 'static>(&self, key: &'static str) -> Option<&T> {
        let (_, data) = self.entries.iter().find(|(k, _)| *k == key)?;
        data.as_ref().as_any().downcast_ref::<T>()
    }

    pub fn read_mut<T: 'static>(&mut self, key: &'static str) -> Option<&mut T> {
        let (_, data) = self.entries.iter_mut().find(|(k, _)| *k == key)?;
        data.as_mut().as_any_mut().downcast_mut::<T>()
    }
}

impl Clone for CycleState {
    fn clone(&self) -> CycleState {
        CycleState {
            entries: self
                .entries
                .iter()
                .map(|(k, v)| (*k, v.as_ref().clone_data()))
                .collect(),
            skip_filter: self.skip_filter.clone(),
            skip_score: self.skip_score.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_data_is_read_back_by_type_and_cloned_deeply() {
        let mut state = CycleState::new();
        state.write("counts", vec![1, 2, 3]);
        assert_eq!(state.read::<Vec<i32>>("counts"), Some(&vec![1, 2, 3]));
        assert!(state.read::<String>("counts").is_none());
        let copy = state.clone();
        state.read_mut::<Vec<i32>>("counts").unwrap().push(4);
        assert_eq!(copy.read::<Vec<i32>>("counts").unwrap().len(), 3);
    }
}
